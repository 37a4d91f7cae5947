#include "meshtrain/models/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <span>

#include "meshtrain/core/error.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/gpt2_decoder.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/engine.h"
#include "tests/models/decoding_test_support.h"

namespace meshtrain {
namespace {

const GPT2Config kBytes{256, 16, 32, 1, 2};

TEST(Sampling, SeededAndGreedyAreDeterministic) {
  GPT2 model(kBytes);
  Gpt2Decoder decoder(model);
  const std::string a = sample_text(decoder, "hello", {.count = 20, .temperature = 1.0f, .seed = 4});
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a, sample_text(decoder, "hello", {.count = 20, .temperature = 1.0f, .seed = 4}));
  EXPECT_NE(a, sample_text(decoder, "hello", {.count = 20, .temperature = 1.0f, .seed = 5}));
  const std::string g = sample_text(decoder, "", {.count = 20, .temperature = 0.0f, .seed = 1});
  EXPECT_EQ(g, sample_text(decoder, "", {.count = 20, .temperature = 0.0f, .seed = 2}));
  // Prompts longer than the context keep only the last ctx tokens.
  const std::vector<int32_t> out = generate(decoder, std::vector<int32_t>(40, 'x'), {.count = 3});
  ASSERT_EQ(out.size(), 43u);
  EXPECT_EQ(out[39], 'x');
}

// Position t of one forward over the whole sequence must see only tokens 0..t: its logits equal
// those of a forward over the prefix of length t + 1 (the sampling path).
TEST(Sampling, LogitsAreCausal) {
  GPT2 model(kBytes, {.seed = 9});
  const std::vector<int32_t> ids = {'T', 'h', 'e', ' ', 'c', 'a', 't', ' ', 's', 'a', 't', '.'};
  const auto logits_of = [&](size_t length) {
    MicroBatch mb;  // no targets: the head leaves the logits in mb.hidden
    mb.tokens = Tensor::from_vector(std::vector<int32_t>(ids.begin(), ids.begin() + length),
                                    {1, static_cast<int64_t>(length)});
    Engine(model).forward(mb);
    return mb.hidden.to_vector();
  };
  const std::vector<float> full = logits_of(ids.size());
  for (size_t length = 1; length <= ids.size(); ++length) {
    const std::vector<float> prefix = logits_of(length);
    for (size_t v = 0; v < 256; ++v)
      ASSERT_NEAR(prefix[(length - 1) * 256 + v], full[(length - 1) * 256 + v], 1e-5f) << length;
  }
}

// Generation written with the full forward pass (no cache): each token comes from the logits of the
// last position of a forward over the sequence's last `window` tokens, where window_after gives the
// next window from the previous one; then the argmax (lowest id on ties) or one draw of Rng(seed).
std::vector<int32_t> full_forward_generate(GPT2& model, std::vector<int32_t> seq, int64_t count,
                                           float temperature, uint64_t seed,
                                           const std::function<int64_t(int64_t)>& window_after) {
  const int64_t vocab = model.config().vocab;
  int64_t window = std::min<int64_t>(static_cast<int64_t>(seq.size()), model.config().ctx);
  Rng rng(seed);
  for (int64_t n = 0; n < count; ++n) {
    if (n > 0) window = window_after(window);
    MicroBatch mb;  // no targets: the head leaves the logits in mb.hidden
    mb.tokens =
        Tensor::from_vector(std::vector<int32_t>(seq.end() - window, seq.end()), {1, window});
    Engine(model).forward(mb);
    const std::vector<float> logits = mb.hidden.view((window - 1) * vocab, {vocab}).to_vector();
    const auto top = std::max_element(logits.begin(), logits.end());
    auto token = static_cast<int32_t>(top - logits.begin());
    if (temperature > 0.0f) {
      std::vector<double> weights;
      double total = 0.0;
      for (float l : logits) total += weights.emplace_back(std::exp((l - *top) / temperature));
      double u = rng.uniform() * total;
      for (size_t i = 0; i < weights.size(); ++i) {
        if (u < weights[i]) {
          token = static_cast<int32_t>(i);
          break;
        }
        u -= weights[i];
      }
    }
    seq.push_back(token);
  }
  return seq;
}

// The algorithm before the key/value cache: every token from the last min(length, ctx) tokens.
std::vector<int32_t> recompute_generate(GPT2& model, std::vector<int32_t> prompt, int64_t count) {
  const int64_t ctx = model.config().ctx;
  return full_forward_generate(model, std::move(prompt), count, 0.0f, 0,
                               [&](int64_t w) { return std::min(w + 1, ctx); });
}

// The documented window (sampling.h): grows by one token; past ctx it restarts as the last
// max(1, ctx / 2) tokens.
std::function<int64_t(int64_t)> sliding_window(int64_t ctx) {
  return [ctx](int64_t w) { return w < ctx ? w + 1 : std::max<int64_t>(1, ctx / 2); };
}

const GPT2Config& kSmall = test::kSmallDecoder;

// Inside the context the cached decoder gives the recompute algorithm's greedy tokens.
TEST(Sampling, GreedyMatchesRecomputeInsideTheContext) {
  GPT2 model(kSmall, {.seed = 21});
  Gpt2Decoder decoder(model);
  for (int64_t prompt : {1, 5, 15}) {
    const std::vector<int32_t> ids = test::random_ids(prompt, kSmall.vocab, 30 + prompt);
    const int64_t count = kSmall.ctx - prompt + 1;  // the last token comes from a full window
    EXPECT_EQ(generate(decoder, ids, {.count = count, .temperature = 0.0f}),
              recompute_generate(model, ids, count))
        << "prompt of " << prompt;
  }
}

// Past the context the window slides as documented, for short and long prompts and odd contexts.
TEST(Sampling, GreedyPastTheContextSlidesTheWindow) {
  for (const GPT2Config& config :
       {kSmall, GPT2Config{64, 7, 32, 2, 4}, GPT2Config{64, 1, 32, 1, 2}}) {
    GPT2 model(config, {.seed = 22});
    Gpt2Decoder decoder(model);
    for (int64_t prompt : {int64_t{1}, config.ctx + 4}) {
      const std::vector<int32_t> ids = test::random_ids(prompt, config.vocab, 40 + prompt);
      const int64_t count = 3 * config.ctx + 5;
      const std::vector<int32_t> want =
          full_forward_generate(model, ids, count, 0.0f, 0, sliding_window(config.ctx));
      EXPECT_EQ(generate(decoder, ids, {.count = count, .temperature = 0.0f}), want)
          << config.describe() << ", prompt of " << prompt;
      if (config.ctx == 1) {  // a window of one token is the recompute algorithm's
        EXPECT_EQ(want, recompute_generate(model, ids, count));
      }
    }
  }
}

// With temperature > 0 the tokens are those of the seeded draws over the same logits: the same seed
// gives the same tokens, another seed other tokens.
TEST(Sampling, TemperatureSamplesAreSeededDraws) {
  GPT2 model(kSmall, {.seed = 23});
  Gpt2Decoder decoder(model);
  const std::vector<int32_t> ids = test::random_ids(4, kSmall.vocab, 50);
  const int64_t count = 2 * kSmall.ctx + 3;
  const std::vector<int32_t> a =
      generate(decoder, ids, {.count = count, .temperature = 0.7f, .seed = 8});
  EXPECT_EQ(a, full_forward_generate(model, ids, count, 0.7f, 8, sliding_window(kSmall.ctx)));
  EXPECT_EQ(a, generate(decoder, ids, {.count = count, .temperature = 0.7f, .seed = 8}));
  EXPECT_NE(a, generate(decoder, ids, {.count = count, .temperature = 0.7f, .seed = 9}));
  EXPECT_EQ(generate(decoder, ids, {.count = 0}), ids);
}

TEST(Sampling, LearnsARepeatingPattern) {
  GPT2 model(kBytes, {.seed = 2});
  std::vector<Token> text;
  for (int i = 0; i < 400; ++i) text.push_back(static_cast<Token>("abcd"[i % 4]));
  TokenBatches batches(text, 256, 4, 16);
  AdamW adamw;
  const std::vector<OptimizerSlot> slots = parameter_slots(model);
  for (int step = 0; step < 60; ++step) {
    const TokenBatch batch = batches.batch(step);
    MicroBatch mb = batch.micro_batch();
    zero_grad(model);
    forward(model, mb);
    backward(model, mb);
    adamw.step(slots, 1e-2f);
  }
  Gpt2Decoder decoder(model);  // reads the trained values
  EXPECT_EQ(sample_text(decoder, "ab", {.count = 10, .temperature = 0.0f}), "cdabcdabcd");
}

// A decoder whose logits are the same after every token: what the warpers keep is then known.
class FixedLogits : public Decoder {
 public:
  explicit FixedLogits(std::vector<float> logits) : logits_(std::move(logits)) {}
  int64_t vocab() const override { return static_cast<int64_t>(logits_.size()); }
  int64_t context() const override { return 1 << 20; }
  int64_t length() const override { return length_; }
  void reset() override { length_ = 0; }
  std::vector<float> append(std::span<const int32_t> tokens) override {
    length_ += static_cast<int64_t>(tokens.size());
    return logits_;
  }

 private:
  std::vector<float> logits_;
  int64_t length_ = 0;
};

std::set<int32_t> drawn(Decoder& decoder, const SampleOptions& options) {
  const std::vector<int32_t> out = generate(decoder, {0}, options);
  return std::set<int32_t>(out.begin() + 1, out.end());
}

// Probabilities 0.05, 0.5, 0.15, 0.3 at temperature 1: top-k keeps the k most likely, top-p the
// fewest most likely reaching p (of the top-k's mass when both are given), and the draws cover
// exactly those.
TEST(Sampling, TopKAndTopPDrawOnlyFromTheKeptTokens) {
  FixedLogits decoder({std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)});
  const SampleOptions all{.count = 400, .temperature = 1.0f, .seed = 3};
  EXPECT_EQ(drawn(decoder, all), (std::set<int32_t>{0, 1, 2, 3}));
  SampleOptions o = all;
  o.top_k = 2;
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1, 3}));
  o.top_k = 1;
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1}));
  o = all;
  o.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1, 3}));
  o.top_p = 0.85f;  // needs 0.15 too
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1, 2, 3}));
  o.top_p = 0.1f;  // the most likely alone
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1}));
  o.top_k = 3;  // of 0.95: 0.5 / 0.95 < 0.6 <= 0.8 / 0.95
  o.top_p = 0.6f;
  EXPECT_EQ(drawn(decoder, o), (std::set<int32_t>{1, 3}));
  o.top_k = 0;
  o.top_p = 1.0f;  // no warper: the very draws of the plain run
  EXPECT_EQ(generate(decoder, {0}, o), generate(decoder, {0}, all));
}

TEST(Sampling, CallsOnTokenWithEachGeneratedToken) {
  GPT2 model(kBytes, {.seed = 5});
  Gpt2Decoder decoder(model);
  std::vector<int32_t> seen;
  const std::vector<int32_t> out =
      generate(decoder, {'a', 'b'}, {.count = 12, .temperature = 0.9f, .seed = 1},
               [&](int32_t token) { seen.push_back(token); });
  EXPECT_EQ(seen, std::vector<int32_t>(out.begin() + 2, out.end()));
}

TEST(Sampling, RejectsBadInput) {
  GPT2 model(kBytes);
  Gpt2Decoder decoder(model);
  EXPECT_THROW(generate(decoder, {}, {}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {256}, {}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {'a', -1}, {}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.count = -1}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.temperature = NAN}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.temperature = -1.0f}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.top_k = -1}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.top_p = 0.0f}), InvalidArgument);
  EXPECT_THROW(generate(decoder, {1}, {.top_p = 1.5f}), InvalidArgument);
  GPT2 tiny(gpt2_preset("tiny"));
  Gpt2Decoder tiny_decoder(tiny);
  EXPECT_THROW(sample_text(tiny_decoder, "x", {}), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

#include "models/sampling.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "models/adamw.h"
#include "models/single_rank.h"
#include "models/token_batches.h"
#include "parallel/engine.h"

namespace meshtrain {
namespace {

const GPT2Config kBytes{256, 16, 32, 1, 2};

TEST(Sampling, SeededAndGreedyAreDeterministic) {
  GPT2 model(kBytes);
  const std::string a = sample_text(model, "hello", {.count = 20, .temperature = 1.0f, .seed = 4});
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a, sample_text(model, "hello", {.count = 20, .temperature = 1.0f, .seed = 4}));
  EXPECT_NE(a, sample_text(model, "hello", {.count = 20, .temperature = 1.0f, .seed = 5}));
  const std::string g = sample_text(model, "", {.count = 20, .temperature = 0.0f, .seed = 1});
  EXPECT_EQ(g, sample_text(model, "", {.count = 20, .temperature = 0.0f, .seed = 2}));
  // Prompts longer than the context keep only the last ctx tokens.
  const std::vector<int32_t> out = generate(model, std::vector<int32_t>(40, 'x'), {.count = 3});
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

TEST(Sampling, LearnsARepeatingPattern) {
  GPT2 model(kBytes, {.seed = 2});
  std::vector<uint16_t> text;
  for (int i = 0; i < 400; ++i) text.push_back(static_cast<uint16_t>("abcd"[i % 4]));
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
  EXPECT_EQ(sample_text(model, "ab", {.count = 10, .temperature = 0.0f}), "cdabcdabcd");
}

TEST(Sampling, RejectsBadInput) {
  GPT2 model(kBytes);
  EXPECT_THROW(generate(model, {}, {}), InvalidArgument);
  EXPECT_THROW(generate(model, {256}, {}), InvalidArgument);
  EXPECT_THROW(generate(model, {1}, {.temperature = -1.0f}), InvalidArgument);
  GPT2 tiny(gpt2_preset("tiny"));
  EXPECT_THROW(sample_text(tiny, "x", {}), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

#include "meshtrain/models/gpt2_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/parallel/engine.h"
#include "tests/models/decoding_test_support.h"

namespace meshtrain {
namespace {

const GPT2Config& kSmall = test::kSmallDecoder;

using test::expect_close;
using test::full_logits;

// The cached decoder's logits at every position equal those of the full forward over the same
// prefix, for every split into a prefill of `prompt` tokens and one token at a time after it.
TEST(Gpt2Decoder, MatchesTheFullForwardAtEveryPosition) {
  GPT2 model(kSmall, {.seed = 5});
  const std::vector<int32_t> tokens = test::random_ids(kSmall.ctx, kSmall.vocab, 11);
  const std::vector<float> full = full_logits(model, tokens);  // causal: row t sees 0..t
  const int64_t vocab = kSmall.vocab;
  Gpt2Decoder decoder(model);
  for (int64_t prompt = 1; prompt <= kSmall.ctx; prompt += 5) {
    decoder.reset();
    std::vector<float> logits = decoder.append(std::span(tokens).first(prompt));
    EXPECT_EQ(decoder.length(), prompt);
    expect_close(logits, full.data() + (prompt - 1) * vocab, vocab,
                 "prefill of " + std::to_string(prompt));
    for (int64_t t = prompt; t < kSmall.ctx; ++t) {
      logits = decoder.append(std::span(tokens).subspan(t, 1));
      expect_close(logits, full.data() + t * vocab, vocab,
                   "prefill " + std::to_string(prompt) + ", position " + std::to_string(t));
    }
    EXPECT_EQ(decoder.length(), kSmall.ctx);
  }
}

// After reset() the decoder encodes from position 0 again: a window of a longer sequence gives the
// logits of the full forward over that window alone (its first token at position 0).
TEST(Gpt2Decoder, ResetEncodesAWindowFromPositionZero) {
  GPT2 model(kSmall, {.seed = 6});
  const std::vector<int32_t> tokens = test::random_ids(2 * kSmall.ctx, kSmall.vocab, 12);
  Gpt2Decoder decoder(model);
  decoder.append(std::span(tokens).first(kSmall.ctx));
  decoder.reset();
  const std::vector<int32_t> window(tokens.begin() + 20, tokens.begin() + 28);
  const std::vector<float> full = full_logits(model, window);
  decoder.append(std::span(window).first(3));
  for (size_t t = 3; t < window.size(); ++t)
    expect_close(decoder.append(std::span(window).subspan(t, 1)), full.data() + t * kSmall.vocab,
                 kSmall.vocab, "position " + std::to_string(t));
}

// The decoder reads the parameters when it is built: later changes need a new decoder.
TEST(Gpt2Decoder, ReadsTheModelsValues) {
  GPT2 model(kSmall, {.seed = 7});
  const std::vector<int32_t> tokens = {1, 2, 3};
  const std::vector<float> before = Gpt2Decoder(model).append(tokens);
  model.init(8);
  const std::vector<float> after = Gpt2Decoder(model).append(tokens);
  const std::vector<float> full = full_logits(model, tokens);
  expect_close(after, full.data() + 2 * kSmall.vocab, kSmall.vocab, "after init(8)");
  EXPECT_NE(before, after);
}

// A model on a GPU is decoded on the host from a copy of its values: the logits of the CPU model
// with the same initial values.
TEST(Gpt2Decoder, CopiesTheValuesOfAModelOnAGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  GPT2 gpu(kSmall, {.device = Device::cuda(0), .seed = 9});
  GPT2 cpu(kSmall, {.seed = 9});
  const std::vector<int32_t> tokens = test::random_ids(10, kSmall.vocab, 13);
  EXPECT_EQ(Gpt2Decoder(gpu).append(tokens), Gpt2Decoder(cpu).append(tokens));
}

TEST(Gpt2Decoder, RejectsBadInput) {
  GPT2 model(kSmall);
  Gpt2Decoder decoder(model);
  EXPECT_THROW(decoder.append({}), InvalidArgument);
  const std::vector<int32_t> too_big = {1, 64}, negative = {-1};
  EXPECT_THROW(decoder.append(too_big), InvalidArgument);
  EXPECT_THROW(decoder.append(negative), InvalidArgument);
  EXPECT_EQ(decoder.length(), 0);
  decoder.append(std::vector<int32_t>(kSmall.ctx, 3));
  const std::vector<int32_t> one = {3};
  try {
    decoder.append(one);
    FAIL() << "appending past the context length must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("context length 16"), std::string::npos) << e.what();
  }
  decoder.reset();
  EXPECT_EQ(decoder.append(one).size(), static_cast<size_t>(kSmall.vocab));
}

}  // namespace
}  // namespace meshtrain

// The Llama decoder against the training model's own forward pass: the logits after every prefix,
// whether encoded in one prefill, token by token or in chunks after a prefill; with grouped-query
// (KV < H), multi-query (KV = 1) and plain (KV = H) attention, untied and tied; and greedy
// generation through sampling.h against the argmax of full forwards.
#include "meshtrain/models/llama_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/models/llama_init.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/models/sampling.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/engine.h"
#include "meshtrain/parallel/parameter_source.h"
#include "tests/models/decoding_test_support.h"

namespace meshtrain {
namespace {

// H = 4 query heads of 6 dims over kv_heads key/value heads.
LlamaConfig small(int64_t kv_heads, bool tied) {
  return LlamaConfig{.vocab = 37,
                     .ctx = 16,
                     .dim = 24,
                     .ffn_dim = 40,
                     .layers = 2,
                     .heads = 4,
                     .kv_heads = kv_heads,
                     .rope_theta = 10000,
                     .rms_norm_eps = 1e-5,
                     .tie_embeddings = tied};
}

std::string describe(const LlamaConfig& c) {
  return c.describe() + (c.tie_embeddings ? " tied" : " untied");
}

// Initialised on `device`, then moved off the initialisation's symmetry (unit gains, small
// weights) so that every term, the rotary angles' included, changes the logits.
std::unique_ptr<Llama> built(const LlamaConfig& config, uint64_t seed,
                             Device device = Device::cpu()) {
  auto model = std::make_unique<Llama>(config, device);
  materialize(*model, LlamaInitValues(config, seed), device);
  for (Parameter* p : model->parameters()) {
    std::vector<float> value = p->value().to_vector(), noise(value.size());
    fill_normal(noise.data(), p->numel(), seed + 100, fnv1a64(p->name()), 0, 0.1f);
    for (size_t i = 0; i < value.size(); ++i) value[i] += noise[i];
    p->value().copy_from(Tensor::from_vector(value, p->value().shape()));
  }
  return model;
}

using test::expect_close;
using test::full_logits;

const std::vector<LlamaConfig> kConfigs = {small(2, false), small(2, true), small(4, false),
                                           small(4, true), small(1, false)};

// The decoder's logits at every position equal those of the full forward over the same prefix
// (row t of one causal forward): a prefill of every length, then one token at a time after it.
TEST(LlamaDecoder, MatchesTheFullForwardAtEveryPosition) {
  for (const LlamaConfig& c : kConfigs) {
    const auto model = built(c, 5);
    const std::vector<int32_t> tokens = test::random_ids(c.ctx, c.vocab, 11);
    const std::vector<float> full = full_logits(*model, tokens);
    LlamaDecoder decoder(*model);
    for (int64_t prompt = 1; prompt <= c.ctx; ++prompt) {
      decoder.reset();
      std::vector<float> logits = decoder.append(std::span(tokens).first(prompt));
      EXPECT_EQ(decoder.length(), prompt);
      expect_close(logits, full.data() + (prompt - 1) * c.vocab, c.vocab,
                   describe(c) + ": prefill of " + std::to_string(prompt));
      for (int64_t t = prompt; t < c.ctx; ++t) {
        logits = decoder.append(std::span(tokens).subspan(t, 1));
        expect_close(logits, full.data() + t * c.vocab, c.vocab,
                     describe(c) + ": prefill " + std::to_string(prompt) + ", position " +
                         std::to_string(t));
      }
      EXPECT_EQ(decoder.length(), c.ctx);
    }
  }
}

// Appends of several tokens after the cache holds some: their queries attend to the cache and
// causally to one another, at the rotary angles of their absolute positions.
TEST(LlamaDecoder, ChunkedAppendsMatchTheFullForward) {
  for (const LlamaConfig& c : kConfigs) {
    const auto model = built(c, 6);
    const std::vector<int32_t> tokens = test::random_ids(c.ctx, c.vocab, 12);
    const std::vector<float> full = full_logits(*model, tokens);
    LlamaDecoder decoder(*model);
    int64_t at = 0;
    for (int64_t chunk : {3, 1, 5, 2, 4, 1}) {
      const std::vector<float> logits = decoder.append(std::span(tokens).subspan(at, chunk));
      at += chunk;
      EXPECT_EQ(decoder.length(), at);
      expect_close(logits, full.data() + (at - 1) * c.vocab, c.vocab,
                   describe(c) + ": chunk ending at " + std::to_string(at));
    }
    ASSERT_EQ(at, c.ctx);
  }
}

// After reset() the decoder encodes from position 0 again: a window of a longer sequence gives the
// logits of the full forward over that window alone.
TEST(LlamaDecoder, ResetEncodesAWindowFromPositionZero) {
  const LlamaConfig c = small(2, false);
  const auto model = built(c, 7);
  const std::vector<int32_t> tokens = test::random_ids(2 * c.ctx, c.vocab, 13);
  LlamaDecoder decoder(*model);
  decoder.append(std::span(tokens).first(c.ctx));
  decoder.reset();
  const std::vector<int32_t> window(tokens.begin() + 20, tokens.begin() + 28);
  const std::vector<float> full = full_logits(*model, window);
  decoder.append(std::span(window).first(3));
  for (size_t t = 3; t < window.size(); ++t)
    expect_close(decoder.append(std::span(window).subspan(t, 1)), full.data() + t * c.vocab,
                 c.vocab, "position " + std::to_string(t));
}

// The family's spec gives this decoder for a model it built (what --sample and generate use).
TEST(LlamaDecoder, TheSpecMakesIt) {
  const ModelSpecPtr spec = llama_model(small(2, true));
  const std::unique_ptr<Model> whole = spec->build(Device::cpu());
  materialize(*whole, LlamaInitValues(small(2, true), 3), Device::cpu());
  const std::unique_ptr<Decoder> decoder = spec->decoder(*whole);
  ASSERT_NE(decoder, nullptr);
  EXPECT_NE(dynamic_cast<LlamaDecoder*>(decoder.get()), nullptr);
  const std::vector<int32_t> tokens = {1, 2, 3};
  const std::vector<float> full = full_logits(dynamic_cast<Llama&>(*whole), tokens);
  expect_close(decoder->append(tokens), full.data() + 2 * 37, 37, "the spec's decoder");
}

// A model on a GPU is decoded on the host from a copy of its values.
TEST(LlamaDecoder, CopiesTheValuesOfAModelOnAGpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const LlamaConfig c = small(2, false);
  const auto gpu = built(c, 9, Device::cuda(0));
  const auto cpu = built(c, 9);
  const std::vector<int32_t> tokens = test::random_ids(10, c.vocab, 14);
  EXPECT_EQ(LlamaDecoder(*gpu).append(tokens), LlamaDecoder(*cpu).append(tokens));
}

TEST(LlamaDecoder, RefusesAModelWithoutValues) {
  Llama model(small(2, false), Device::cpu());  // parameters created without tensors
  EXPECT_THROW(LlamaDecoder decoder(model), InvalidArgument);
}

TEST(LlamaDecoder, RejectsBadInput) {
  const LlamaConfig c = small(2, false);
  const auto model = built(c, 3);
  LlamaDecoder decoder(*model);
  EXPECT_THROW(decoder.append({}), InvalidArgument);
  const std::vector<int32_t> too_big = {1, 37}, negative = {-1};
  EXPECT_THROW(decoder.append(too_big), InvalidArgument);
  EXPECT_THROW(decoder.append(negative), InvalidArgument);
  EXPECT_EQ(decoder.length(), 0);
  decoder.append(std::vector<int32_t>(c.ctx - 2, 3));
  const std::vector<int32_t> three = {3, 4, 5}, one = {3};
  EXPECT_THROW(decoder.append(three), InvalidArgument);  // two positions left
  EXPECT_EQ(decoder.length(), c.ctx - 2);
  decoder.append(std::span(three).first(2));
  try {
    decoder.append(one);
    FAIL() << "appending past the context length must throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("context length 16"), std::string::npos) << e.what();
  }
  decoder.reset();
  EXPECT_EQ(decoder.append(one).size(), static_cast<size_t>(c.vocab));
}

// Greedy generation with the cache gives the tokens of the argmax (lowest id on ties) of a full
// forward per token over the window sampling.h documents: the whole sequence while it fits in
// ctx, then restarting as the last ctx / 2 tokens whenever it would exceed ctx.
TEST(LlamaDecoder, GreedyGenerateIsTheArgmaxOfFullForwards) {
  for (const LlamaConfig& c : {small(2, false), small(4, true)}) {
    const auto model = built(c, 21);
    LlamaDecoder decoder(*model);
    for (int64_t prompt : {1, 5, 20}) {
      std::vector<int32_t> want = test::random_ids(prompt, c.vocab, 30 + prompt);
      const std::vector<int32_t> got =
          generate(decoder, want, {.count = 2 * c.ctx + 3, .temperature = 0.0f});
      int64_t window = std::min(prompt, c.ctx);
      for (int64_t n = 0; n < 2 * c.ctx + 3; ++n) {
        if (n > 0) window = window < c.ctx ? window + 1 : c.ctx / 2;
        const std::vector<float> logits =
            full_logits(*model, std::vector<int32_t>(want.end() - window, want.end()));
        const auto last = logits.begin() + (window - 1) * c.vocab;
        want.push_back(static_cast<int32_t>(std::max_element(last, last + c.vocab) - last));
      }
      EXPECT_EQ(got, want) << describe(c) << ", prompt of " << prompt;
    }
  }
}

// A small byte-level Llama trained on "abcd..." samples the pattern through sample_text.
TEST(LlamaDecoder, SamplesAPatternItLearned) {
  LlamaConfig c = small(2, false);
  c.vocab = 256;
  Llama model(c, Device::cpu());
  materialize(model, LlamaInitValues(c, 2), Device::cpu());
  std::vector<Token> text;
  for (int i = 0; i < 400; ++i) text.push_back(static_cast<Token>("abcd"[i % 4]));
  TokenBatches batches(text, 256, 4, 16);
  AdamW adamw;
  const std::vector<OptimizerSlot> slots = parameter_slots(model);
  for (int step = 0; step < 60; ++step) {
    MicroBatch mb = batches.batch(step).micro_batch();
    zero_grad(model);
    forward(model, mb);
    backward(model, mb);
    adamw.step(slots, 1e-2f);
  }
  LlamaDecoder decoder(model);  // reads the trained values
  EXPECT_EQ(sample_text(decoder, "ab", {.count = 10, .temperature = 0.0f}), "cdabcdabcd");
}

}  // namespace
}  // namespace meshtrain

// The whole GPT-2 backward against central finite differences of the forward loss.
#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"

namespace meshtrain {
namespace {

TokenBatch random_batch(const GPT2Config& config, int64_t batch, int64_t seq, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(batch * (seq + 1)));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.next_u64() % config.vocab);
  std::vector<int32_t> tokens, targets;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      tokens.push_back(ids[b * (seq + 1) + t]);
      targets.push_back(ids[b * (seq + 1) + t + 1]);
    }
  return {Tensor::from_vector(tokens, {batch, seq}), Tensor::from_vector(targets, {batch, seq})};
}

double loss_of(GPT2& model, const TokenBatch& batch) {
  MicroBatch mb = batch.micro_batch();
  return forward(model, mb);
}

// Moves every parameter away from the symmetric initialisation (zero biases, unit gains) so that
// every term of the backward pass contributes.
void perturb(GPT2& model) {
  for (Parameter* p : model.parameters()) {
    std::vector<float> noise(static_cast<size_t>(p->numel()));
    fill_normal(noise.data(), p->numel(), 99, fnv1a64(p->name()), 0, 0.1f);
    float* v = p->value().data<float>();
    for (int64_t i = 0; i < p->numel(); ++i) v[i] += noise[i];
  }
}

TEST(GPT2Backward, LossAtInitIsLogVocab) {
  const GPT2Config config{256, 64, 128, 4, 4};
  GPT2 model(config);
  const TokenBatch mb = random_batch(config, 4, 64, 1);
  EXPECT_NEAR(loss_of(model, mb), std::log(256.0), 0.05);
}

// Tolerance: |analytic - numeric| <= 1e-2 |numeric| + 1e-4. The forward is f32 (per-token losses
// accurate to ~1e-7 relative); with h = 1e-2 the rounding noise of the difference quotient is
// ~1e-5 and the O(h^2) truncation error ~1e-5 for these magnitudes, so the bound has 10x margin.
TEST(GPT2Backward, MatchesFiniteDifferencesOnEveryParameter) {
  const GPT2Config config = gpt2_preset("tiny");
  GPT2 model(config, {.seed = 5});
  perturb(model);
  const TokenBatch batch = random_batch(config, 2, 12, 2);  // T < ctx: unused wpe rows get 0
  zero_grad(model);
  {
    MicroBatch mb = batch.micro_batch();
    forward(model, mb);
    backward(model, mb);
    EXPECT_TRUE(mb.saved.empty());
  }
  const double h = 1e-2;
  for (Parameter* p : model.parameters()) {
    const std::vector<float> grad = p->grad().to_vector();
    float* value = p->value().data<float>();
    const int64_t n = p->numel();
    for (int64_t i : {int64_t{0}, n / 3, n / 2 + 1, n - 1}) {
      const float saved = value[i];
      value[i] = static_cast<float>(saved + h);
      const double plus = loss_of(model, batch);
      value[i] = static_cast<float>(saved - h);
      const double minus = loss_of(model, batch);
      value[i] = saved;
      const double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 1e-2 * std::abs(numeric) + 1e-4)
          << p->name() << "[" << i << "]";
    }
  }
}

TEST(GPT2Backward, AccumulatesAndSkipsFrozenParameters) {
  const GPT2Config config = gpt2_preset("tiny");
  GPT2 model(config);
  const TokenBatch batch = random_batch(config, 2, 16, 3);
  const auto step = [&] {
    MicroBatch mb = batch.micro_batch();
    forward(model, mb);
    backward(model, mb);
  };
  step();
  std::vector<std::vector<float>> once;
  for (Parameter* p : model.parameters()) once.push_back(p->grad().to_vector());
  step();
  const std::vector<Parameter*> params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    const std::vector<float> twice = params[k]->grad().to_vector();
    for (size_t i = 0; i < twice.size(); ++i)
      ASSERT_NEAR(twice[i], 2 * once[k][i], 1e-6f + 1e-5f * std::abs(once[k][i]))
          << params[k]->name();
  }

  zero_grad(model);
  model.parameter("wte.weight").set_requires_grad(false);
  model.parameter("h.1.mlp.c_fc.weight").set_requires_grad(false);
  step();
  for (size_t k = 0; k < params.size(); ++k) {
    const std::vector<float> grad = params[k]->grad().to_vector();
    const bool frozen = !params[k]->requires_grad();
    for (size_t i = 0; i < grad.size(); ++i) {
      if (frozen)
        ASSERT_EQ(grad[i], 0.0f) << params[k]->name();
      else
        ASSERT_NEAR(grad[i], once[k][i], 1e-6f + 1e-5f * std::abs(once[k][i])) << params[k]->name();
    }
  }
}

// Zero-bubble schedules run each layer's backward in two parts, the weight gradients later: the
// same gradients as the whole backward, and nothing left deferred.
TEST(GPT2Backward, SplitBackwardGivesTheSameGradients) {
  const GPT2Config config = gpt2_preset("tiny");
  const TokenBatch batch = random_batch(config, 2, 12, 5);
  const auto gradients = [&](bool split) {
    GPT2 model(config);
    perturb(model);
    MicroBatch mb = batch.micro_batch();
    forward(model, mb);
    mb.loss_scale = 1.0f / static_cast<float>(mb.tokens.numel());
    const std::vector<Layer*> layers = model.layers();
    for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l)
      if (split) {
        layers[l]->backward_input(mb, l);
      } else {
        layers[l]->backward(mb, l);
      }
    if (split)  // all inputs first, then all weights, as a pipeline's cool-down may run them
      for (int l = 0; l < static_cast<int>(layers.size()); ++l) layers[l]->backward_weight(mb, l);
    EXPECT_TRUE(mb.saved.empty());
    EXPECT_TRUE(mb.deferred.empty());
    std::vector<std::vector<float>> grads;
    for (Parameter* p : model.parameters()) grads.push_back(p->grad().to_vector());
    return grads;
  };
  const auto whole = gradients(false), split = gradients(true);
  ASSERT_EQ(whole.size(), split.size());
  for (size_t k = 0; k < whole.size(); ++k)
    for (size_t i = 0; i < whole[k].size(); ++i)
      ASSERT_NEAR(split[k][i], whole[k][i], 1e-6f + 1e-5f * std::abs(whole[k][i]))
          << "parameter " << k << ", element " << i;
}

TEST(GPT2Backward, BackwardNeedsTheLossScale) {
  const GPT2Config config = gpt2_preset("tiny");
  GPT2 model(config);
  MicroBatch mb = random_batch(config, 1, 4, 4).micro_batch();
  forward(model, mb);
  EXPECT_THROW(model.layers().back()->backward(mb, 3), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

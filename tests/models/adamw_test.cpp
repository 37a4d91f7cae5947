#include "meshtrain/models/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "meshtrain/core/error.h"
#include "meshtrain/models/lr_schedule.h"

namespace meshtrain {
namespace {

// torch.optim.AdamW by hand, in double.
struct Reference {
  double p, m = 0, v = 0;
  void step(double g, int t, double lr, double wd, double b1 = 0.9, double b2 = 0.95,
            double eps = 1e-8) {
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double m_hat = m / (1 - std::pow(b1, t)), v_hat = v / (1 - std::pow(b2, t));
    p -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
};

OptimizerSlot slot(std::string name, Tensor param, Tensor grad, bool decays) {
  OptimizerSlot slot;
  slot.name = std::move(name);
  slot.param = param;
  slot.grad = grad;
  slot.decays = decays;
  return slot;
}

TEST(AdamW, TwoStepsMatchTheClosedForm) {
  const std::vector<float> p0 = {1.0f, -2.0f, 0.5f, 0.0f}, b0 = {0.25f, -0.75f};
  const std::vector<float> g1 = {0.1f, -0.2f, 3.0f, 0.0f}, g2 = {-0.3f, 0.05f, 1.0f, 2.0f};
  const std::vector<float> bg1 = {1.0f, 2.0f}, bg2 = {-1.0f, 0.5f};
  std::vector<OptimizerSlot> slots = {
      slot("w", Tensor::from_vector(p0, {2, 2}), Tensor::from_vector(g1, {2, 2}), true),
      slot("b", Tensor::from_vector(b0, {2}), Tensor::from_vector(bg1, {2}), false)};
  AdamW adamw({.weight_decay = 0.1f});
  const float lr1 = 1e-2f, lr2 = 5e-3f;
  adamw.step(slots, lr1);
  slots[0].grad.copy_from(Tensor::from_vector(g2, {2, 2}));
  slots[1].grad.copy_from(Tensor::from_vector(bg2, {2}));
  adamw.step(slots, lr2);
  EXPECT_EQ(adamw.steps_taken(), 2);

  const auto check = [&](const OptimizerSlot& slot, const std::vector<float>& p,
                         const std::vector<float>& first, const std::vector<float>& second,
                         double wd) {
    const std::vector<float> got = slot.param.to_vector();
    for (size_t i = 0; i < p.size(); ++i) {
      Reference r{p[i]};
      r.step(first[i], 1, lr1, wd);
      r.step(second[i], 2, lr2, wd);
      EXPECT_NEAR(got[i], r.p, 1e-6) << slot.name << "[" << i << "]";
    }
  };
  check(slots[0], p0, g1, g2, 0.1);
  check(slots[1], b0, bg1, bg2, 0.0);  // no decay on slots that do not decay
  EXPECT_NEAR(adamw.exp_avg(0).to_vector()[2], 0.9 * 0.1 * 3.0 + 0.1 * 1.0, 1e-6);
}

TEST(AdamW, StateIsOptimizerMemoryAndSlotsMustNotChange) {
  MemoryTracker tracker;
  MemoryScope scope(&tracker);
  std::vector<OptimizerSlot> slots = {slot("w", Tensor::zeros({3}), Tensor::zeros({3}), true)};
  AdamW adamw;
  adamw.step(slots, 1e-3f);
  EXPECT_EQ(tracker.stats(DeviceKind::cpu)[MemoryCategory::optimizer].current,
            2 * 3 * sizeof(float));
  std::vector<OptimizerSlot> other = {slot("v", Tensor::zeros({3}), Tensor::zeros({3}), true)};
  EXPECT_THROW(adamw.step(other, 1e-3f), InvalidArgument);
  EXPECT_THROW(AdamW({.beta2 = 1.0f}), InvalidArgument);
}

TEST(LrSchedule, ConstantWarmupAndCosine) {
  EXPECT_EQ(LrSchedule{}.at(1000), 3e-4f);
  const LrSchedule s{.lr = 1.0f, .warmup_steps = 4, .decay_steps = 14, .min_lr = 0.1f};
  s.validate();
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4), 1.0f);
  EXPECT_FLOAT_EQ(s.at(9), 0.55f);  // halfway through the cosine
  EXPECT_FLOAT_EQ(s.at(14), 0.1f);
  EXPECT_FLOAT_EQ(s.at(100), 0.1f);
  EXPECT_THROW((LrSchedule{.lr = 1.0f, .warmup_steps = 4, .decay_steps = 4}.validate()),
               InvalidArgument);
  EXPECT_THROW((LrSchedule{.lr = 1.0f, .min_lr = 2.0f}.validate()), InvalidArgument);
}

TEST(GradClip, ScalesOnlyAboveTheMaximum) {
  std::vector<OptimizerSlot> slots = {
      slot("a", Tensor::zeros({2}), Tensor::from_vector(std::vector<float>{3.0f, 0.0f}, {2}),
           true),
      slot("b", Tensor::zeros({1}), Tensor::from_vector(std::vector<float>{4.0f}, {1}), false)};
  EXPECT_DOUBLE_EQ(grad_sum_squares(slots), 25.0);
  EXPECT_EQ(clip_grads(slots, 5.0, 10.0f), 1.0f);
  EXPECT_EQ(slots[1].grad.to_vector()[0], 4.0f);
  EXPECT_FLOAT_EQ(clip_grads(slots, 5.0, 1.0f), 0.2f);
  EXPECT_FLOAT_EQ(slots[0].grad.to_vector()[0], 0.6f);
  EXPECT_FLOAT_EQ(slots[1].grad.to_vector()[0], 0.8f);
  EXPECT_THROW(clip_grads(slots, std::nan(""), 1.0f), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

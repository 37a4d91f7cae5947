// SwiGLU against its formula in double, extremes included; backward against finite differences and
// the analytic gradient; bf16 within bf16 rounding; argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/ops/bf16_reference.h"
#include "tests/ops/grad_check.h"
#include "tests/ops/test_tensors.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using test::random_tensor;

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

// out = silu(gate) * up and, for d_out, d_gate = d_out * up * silu'(gate) and
// d_up = d_out * silu(gate).
struct SwigluReference {
  std::vector<double> out, d_gate, d_up;
};
SwigluReference reference(const Tensor& gate, const Tensor& up, const Tensor& d_out) {
  const std::vector<float> g = gate.to_vector(), u = up.to_vector(), dy = d_out.to_vector();
  SwigluReference ref;
  for (size_t i = 0; i < g.size(); ++i) {
    const double s = sigmoid(g[i]);
    ref.out.push_back(g[i] * s * u[i]);
    ref.d_gate.push_back(dy[i] * u[i] * s * (1.0 + g[i] * (1.0 - s)));
    ref.d_up.push_back(dy[i] * g[i] * s);
  }
  return ref;
}

TEST(OpsSwiglu, ForwardMatchesFormula) {
  const Tensor gate = random_tensor({4, 9}, 1, -6.0f, 6.0f), up = random_tensor({4, 9}, 2);
  const Tensor out = Tensor::empty({4, 9});
  ops::swiglu_forward(out, gate, up);
  test::expect_all_near(out, reference(gate, up, gate).out, 1e-6, "out");
}

// Far out the sigmoid saturates: silu(g) -> g for large g and -> 0 (not NaN) for very negative g,
// in forward and backward.
TEST(OpsSwiglu, SaturatesWithoutNaN) {
  const std::vector<float> g = {-200.0f, -90.0f, -30.0f, 0.0f, 30.0f, 90.0f, 200.0f};
  const auto n = static_cast<int64_t>(g.size());
  const Tensor gate = Tensor::from_vector(g, {n});
  const Tensor ones = Tensor::from_vector(std::vector<float>(g.size(), 1.0f), {n});
  const Tensor out = Tensor::empty({n}), d_gate = Tensor::empty({n}), d_up = Tensor::empty({n});
  ops::swiglu_forward(out, gate, ones);
  ops::swiglu_backward(d_gate, d_up, ones, gate, ones);
  const SwigluReference ref = reference(gate, ones, ones);
  test::expect_all_near(out, ref.out, 1e-5, "out");
  test::expect_all_near(d_gate, ref.d_gate, 1e-5, "d_gate");
  test::expect_all_near(d_up, ref.d_up, 1e-5, "d_up");
}

TEST(OpsSwiglu, BackwardMatchesFiniteDifferences) {
  const Tensor gate = random_tensor({3, 5}, 3, -4.0f, 4.0f), up = random_tensor({3, 5}, 4);
  const Tensor d_out = random_tensor({3, 5}, 5);
  const Tensor out = Tensor::empty({3, 5});
  const auto loss = [&] {
    ops::swiglu_forward(out, gate, up);
    return test::weighted_sum(out, d_out);
  };
  const Tensor d_gate = random_tensor({3, 5}, 6), d_up = random_tensor({3, 5}, 7);  // overwritten
  ops::swiglu_backward(d_gate, d_up, d_out, gate, up);
  test::expect_grad_near(d_gate, test::numeric_grad(gate, loss), "d_gate");
  test::expect_grad_near(d_up, test::numeric_grad(up, loss), "d_up");
  const SwigluReference ref = reference(gate, up, d_out);
  test::expect_all_near(d_gate, ref.d_gate, 1e-6, "d_gate against the analytic gradient");
  test::expect_all_near(d_up, ref.d_up, 1e-6, "d_up against the analytic gradient");
}

TEST(OpsSwiglu, Bf16WithinRoundingOfTheReference) {
  const Tensor gate = test::bf16_copy(random_tensor({5, 7}, 8, -4.0f, 4.0f));
  const Tensor up = test::bf16_copy(random_tensor({5, 7}, 9));
  const Tensor d_out = test::bf16_copy(random_tensor({5, 7}, 10));
  const SwigluReference ref =
      reference(test::f32_copy(gate), test::f32_copy(up), test::f32_copy(d_out));
  const Tensor out = Tensor::empty({5, 7}, DType::bf16);
  const Tensor d_gate = Tensor::empty({5, 7}, DType::bf16);
  const Tensor d_up = Tensor::empty({5, 7}, DType::bf16);
  ops::swiglu_forward(out, gate, up);
  ops::swiglu_backward(d_gate, d_up, d_out, gate, up);
  test::expect_bf16_near(out, ref.out, "out");
  test::expect_bf16_near(d_gate, ref.d_gate, "d_gate");
  test::expect_bf16_near(d_up, ref.d_up, "d_up");
}

TEST(OpsSwigluValidation, SizesAndDtypesMustMatch) {
  const Tensor gate = Tensor::empty({4, 6});
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::swiglu_forward(Tensor::empty({4, 6}), gate, Tensor::empty({4, 5}));
      },
      "swiglu_forward: up must hold the elements of gate = 24 elements, got f32[4, 5] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::swiglu_forward(Tensor::empty({4, 6}), gate, Tensor::empty({4, 6}, DType::bf16));
      },
      "swiglu_forward: up must have the dtype of gate (f32), got bf16[4, 6] on cpu");
  testing::expect_error<InvalidArgument>(
      [&] {
        ops::swiglu_backward(Tensor::empty({4, 6}), Tensor::empty({24, 2}), Tensor::empty({4, 6}),
                             gate, Tensor::empty({4, 6}));
      },
      "swiglu_backward: d_up must hold the elements of gate = 24 elements, got f32[24, 2] on cpu");
}

}  // namespace
}  // namespace meshtrain

// Softmax cross-entropy per token through a log-sum-exp shifted by the row maximum: no exponent
// overflows, and the loss (max - x[target]) + log(sum) never subtracts two large numbers.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

namespace {
struct ShiftedExpSum {
  float max;  // of the row
  float sum;  // of exp(x - max), in [1, n]
};

ShiftedExpSum shifted_exp_sum(const float* x, int64_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max);
  return {max, sum};
}

// Targets are data, so only the kernel that reads them can check their range.
int64_t checked_target(const int32_t* targets, int64_t n, int64_t vocab, const char* op) {
  const int64_t target = targets[n];
  MT_CHECK(target >= 0 && target < vocab, op, ": targets[", n, "] = ", target,
           " is outside the vocabulary [0, ", vocab, ")");
  return target;
}
}  // namespace

void cross_entropy_forward(const Tensor& losses, const Tensor& logits, const Tensor& targets) {
  const int64_t rows = targets.numel();
  const int64_t vocab = rows ? logits.numel() / rows : 0;
  const int32_t* ids = targets.data<int32_t>();
  float* loss = losses.data<float>();
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = logits.data<float>() + n * vocab;
    const int64_t target = checked_target(ids, n, vocab, "cross_entropy_forward");
    const ShiftedExpSum s = shifted_exp_sum(x, vocab);
    loss[n] = (s.max - x[target]) + std::log(s.sum);
  }
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            float scale) {
  const int64_t rows = targets.numel();
  const int64_t vocab = rows ? logits.numel() / rows : 0;
  const int32_t* ids = targets.data<int32_t>();
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = logits.data<float>() + n * vocab;
    float* dx = d_logits.data<float>() + n * vocab;
    const int64_t target = checked_target(ids, n, vocab, "cross_entropy_backward");
    const ShiftedExpSum s = shifted_exp_sum(x, vocab);
    const float factor = scale / s.sum;
    for (int64_t v = 0; v < vocab; ++v) dx[v] = factor * std::exp(x[v] - s.max);
    dx[target] -= scale;
  }
}

}  // namespace meshtrain::ops::cpu

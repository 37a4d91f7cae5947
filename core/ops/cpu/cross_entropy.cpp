// Softmax cross-entropy over one rank's slice of the vocabulary, in three row-wise passes whose
// results the caller combines across slices. Exponents are shifted by the maximum over all slices,
// so none overflows and every sum_exp term is in (0, 1].
#include <algorithm>
#include <cmath>

#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

namespace {
// The column of a target inside the slice [vocab_start, vocab_start + vocab), or -1 when another
// slice holds it.
int64_t slice_column(int32_t target, int64_t vocab_start, int64_t vocab) {
  const int64_t column = target - vocab_start;
  return column >= 0 && column < vocab ? column : -1;
}
}  // namespace

void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits) {
  const int64_t rows = row_max.numel();
  const int64_t vocab = logits.dim(-1);
  float* max = row_max.data<float>();
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = logits.data<float>() + n * vocab;
    max[n] = *std::max_element(x, x + vocab);
  }
}

void cross_entropy_partials(const Tensor& sum_exp, const Tensor& target_logit, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, int64_t vocab_start) {
  const int64_t rows = targets.numel();
  const int64_t vocab = logits.dim(-1);
  const int32_t* ids = targets.data<int32_t>();
  const float* max = row_max.data<float>();
  float* sums = sum_exp.data<float>();
  float* picked = target_logit.data<float>();
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = logits.data<float>() + n * vocab;
    float sum = 0.0f;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - max[n]);
    sums[n] = sum;
    const int64_t column = slice_column(ids[n], vocab_start, vocab);
    picked[n] = column >= 0 ? x[column] : 0.0f;
  }
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, const Tensor& sum_exp, int64_t vocab_start,
                            float scale) {
  const int64_t rows = targets.numel();
  const int64_t vocab = logits.dim(-1);
  const int32_t* ids = targets.data<int32_t>();
  const float* max = row_max.data<float>();
  const float* sums = sum_exp.data<float>();
  for (int64_t n = 0; n < rows; ++n) {
    const float* x = logits.data<float>() + n * vocab;
    float* dx = d_logits.data<float>() + n * vocab;
    const float factor = scale / sums[n];
    for (int64_t v = 0; v < vocab; ++v) dx[v] = factor * std::exp(x[v] - max[n]);
    const int64_t column = slice_column(ids[n], vocab_start, vocab);
    if (column >= 0) dx[column] -= scale;
  }
}

}  // namespace meshtrain::ops::cpu

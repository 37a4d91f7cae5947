// Softmax cross-entropy over one rank's slice of the vocabulary, in three row-wise passes whose
// results the caller combines across slices. Exponents are shifted by the maximum over all slices,
// so none overflows and every sum_exp term is in (0, 1]. Logits f32 or bf16, statistics f32; rows
// split across threads, e^x vectorised (fast_exp.h).
#include <algorithm>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/fast_exp.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
// The column of a target inside the slice [vocab_start, vocab_start + vocab), or -1 when another
// slice holds it.
int64_t slice_column(int32_t target, int64_t vocab_start, int64_t vocab) {
  const int64_t column = target - vocab_start;
  return column >= 0 && column < vocab ? column : -1;
}

// Rows per thread at least: about 16K logits.
int64_t row_grain(int64_t vocab) {
  return std::max<int64_t>(16384 / std::max<int64_t>(vocab, 1), 1);
}

template <typename T>
MT_INLINE void row_max_rows(const T* logits, float* max, int64_t vocab, int64_t first,
                            int64_t last) {
  for (int64_t n = first; n < last; ++n) {
    const T* x = logits + n * vocab;
    max[n] = lane_max(vocab, [&](int64_t v) { return load(x[v]); });
  }
}
MT_CLONES void row_max_block(const float* logits, float* max, int64_t vocab, int64_t first,
                             int64_t last) {
  row_max_rows(logits, max, vocab, first, last);
}
MT_CLONES void row_max_block(const BF16* logits, float* max, int64_t vocab, int64_t first,
                             int64_t last) {
  row_max_rows(logits, max, vocab, first, last);
}

template <typename T>
MT_INLINE void sum_exp_rows(const T* logits, const float* max, float* sums, int64_t vocab,
                            int64_t first, int64_t last) {
  for (int64_t n = first; n < last; ++n) {
    const T* x = logits + n * vocab;
    const float m = max[n];
    sums[n] = lane_sum(vocab, [&](int64_t v) { return fast_exp(load(x[v]) - m); });
  }
}
MT_CLONES void sum_exp_block(const float* logits, const float* max, float* sums, int64_t vocab,
                             int64_t first, int64_t last) {
  sum_exp_rows(logits, max, sums, vocab, first, last);
}
MT_CLONES void sum_exp_block(const BF16* logits, const float* max, float* sums, int64_t vocab,
                             int64_t first, int64_t last) {
  sum_exp_rows(logits, max, sums, vocab, first, last);
}

template <typename T>
MT_INLINE void softmax_rows(const T* logits, T* d_logits, const float* max, const float* sums,
                            float scale, int64_t vocab, int64_t first, int64_t last) {
  for (int64_t n = first; n < last; ++n) {
    const T* x = logits + n * vocab;
    T* dx = d_logits + n * vocab;
    const float m = max[n];
    const float factor = scale / sums[n];
    for (int64_t v = 0; v < vocab; ++v) store(dx[v], factor * fast_exp(load(x[v]) - m));
  }
}
MT_CLONES void softmax_block(const float* logits, float* d_logits, const float* max,
                             const float* sums, float scale, int64_t vocab, int64_t first,
                             int64_t last) {
  softmax_rows(logits, d_logits, max, sums, scale, vocab, first, last);
}
MT_CLONES void softmax_block(const BF16* logits, BF16* d_logits, const float* max,
                             const float* sums, float scale, int64_t vocab, int64_t first,
                             int64_t last) {
  softmax_rows(logits, d_logits, max, sums, scale, vocab, first, last);
}

template <typename T>
void row_max_as(const Tensor& row_max, const Tensor& logits) {
  const int64_t vocab = logits.dim(-1);
  const T* x = logits.data<T>();
  float* max = row_max.data<float>();
  parallel_for(row_max.numel(), row_grain(vocab),
               [&](int64_t first, int64_t last) { row_max_block(x, max, vocab, first, last); });
}

template <typename T>
void partials_as(const Tensor& sum_exp, const Tensor& target_logit, const Tensor& logits,
                 const Tensor& targets, const Tensor& row_max, int64_t vocab_start) {
  const int64_t rows = targets.numel();
  const int64_t vocab = logits.dim(-1);
  const T* x = logits.data<T>();
  const int32_t* ids = targets.data<int32_t>();
  const float* max = row_max.data<float>();
  float* sums = sum_exp.data<float>();
  float* picked = target_logit.data<float>();
  parallel_for(rows, row_grain(vocab), [&](int64_t first, int64_t last) {
    sum_exp_block(x, max, sums, vocab, first, last);
  });
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t column = slice_column(ids[n], vocab_start, vocab);
    picked[n] = column >= 0 ? load(x[n * vocab + column]) : 0.0f;
  }
}

template <typename T>
void backward_as(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                 const Tensor& row_max, const Tensor& sum_exp, int64_t vocab_start, float scale) {
  const int64_t rows = targets.numel();
  const int64_t vocab = logits.dim(-1);
  const T* x = logits.data<T>();
  T* dx = d_logits.data<T>();
  const int32_t* ids = targets.data<int32_t>();
  const float* max = row_max.data<float>();
  const float* sums = sum_exp.data<float>();
  parallel_for(rows, row_grain(vocab), [&](int64_t first, int64_t last) {
    softmax_block(x, dx, max, sums, scale, vocab, first, last);
    // The target's entry again from f32, minus scale, so that bf16 rounds it once.
    for (int64_t n = first; n < last; ++n) {
      const int64_t column = slice_column(ids[n], vocab_start, vocab);
      if (column < 0) continue;
      const float factor = scale / sums[n];
      store(dx[n * vocab + column],
            factor * fast_exp(load(x[n * vocab + column]) - max[n]) - scale);
    }
  });
}
}  // namespace

void cross_entropy_row_max(const Tensor& row_max, const Tensor& logits) {
  if (logits.dtype() == DType::bf16) return row_max_as<BF16>(row_max, logits);
  row_max_as<float>(row_max, logits);
}

void cross_entropy_partials(const Tensor& sum_exp, const Tensor& target_logit, const Tensor& logits,
                            const Tensor& targets, const Tensor& row_max, int64_t vocab_start) {
  if (logits.dtype() == DType::bf16)
    return partials_as<BF16>(sum_exp, target_logit, logits, targets, row_max, vocab_start);
  partials_as<float>(sum_exp, target_logit, logits, targets, row_max, vocab_start);
}

void cross_entropy_backward(const Tensor& d_logits, const Tensor& logits, const Tensor& targets,
                            const Tensor& row_max, const Tensor& sum_exp, int64_t vocab_start,
                            float scale) {
  if (logits.dtype() == DType::bf16)
    return backward_as<BF16>(d_logits, logits, targets, row_max, sum_exp, vocab_start, scale);
  backward_as<float>(d_logits, logits, targets, row_max, sum_exp, vocab_start, scale);
}

}  // namespace meshtrain::ops::cpu

// Token embedding lookup and its scatter-add backward on one rank's slice of the vocabulary: ids
// outside the slice belong to another rank's rows, so they read zeros and add nothing.
#include <algorithm>

#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

namespace {
// The table row of an id inside the slice [vocab_start, vocab_start + vocab), or -1 when another
// slice holds it.
int64_t slice_row(int32_t id, int64_t vocab_start, int64_t vocab) {
  const int64_t row = id - vocab_start;
  return row >= 0 && row < vocab ? row : -1;
}
}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_start) {
  const int64_t vocab = table.dim(0), channels = table.dim(1);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n) {
    float* y = out.data<float>() + n * channels;
    const int64_t row = slice_row(id[n], vocab_start, vocab);
    if (row < 0) {
      std::fill(y, y + channels, 0.0f);
      continue;
    }
    const float* src = table.data<float>() + row * channels;
    std::copy(src, src + channels, y);
  }
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids,
                        int64_t vocab_start) {
  const int64_t vocab = d_table.dim(0), channels = d_table.dim(1);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const int64_t row = slice_row(id[n], vocab_start, vocab);
    if (row < 0) continue;
    float* dst = d_table.data<float>() + row * channels;
    const float* dy = d_out.data<float>() + n * channels;
    for (int64_t c = 0; c < channels; ++c) dst[c] += dy[c];
  }
}

}  // namespace meshtrain::ops::cpu

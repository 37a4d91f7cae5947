// Token embedding lookup and its scatter-add backward on one rank's slice of the vocabulary: ids
// outside the slice belong to another rank's rows, so they read zeros and add nothing. f32 or bf16
// tables; rows split across threads.
#include <algorithm>
#include <cstring>

#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
// The table row of an id inside the slice [vocab_start, vocab_start + vocab), or -1 when another
// slice holds it.
int64_t slice_row(int32_t id, int64_t vocab_start, int64_t vocab) {
  const int64_t row = id - vocab_start;
  return row >= 0 && row < vocab ? row : -1;
}

int64_t row_grain(int64_t channels) {
  return std::max<int64_t>(16384 / std::max<int64_t>(channels, 1), 1);
}

// dst (one table row) += the rows of d_out listed in `sources`, summed in f32 in list order and
// rounded once.
template <typename T>
MT_INLINE void add_rows(T* dst, const T* d_out, const int32_t* sources, int64_t count,
                        int64_t channels, float* acc) {
  for (int64_t c = 0; c < channels; ++c) acc[c] = load(dst[c]);
  for (int64_t i = 0; i < count; ++i) {
    const T* dy = d_out + sources[i] * channels;
    for (int64_t c = 0; c < channels; ++c) acc[c] += load(dy[c]);
  }
  for (int64_t c = 0; c < channels; ++c) store(dst[c], acc[c]);
}
MT_CLONES void add_rows_block(float* dst, const float* d_out, const int32_t* sources, int64_t count,
                              int64_t channels, float* acc) {
  add_rows(dst, d_out, sources, count, channels, acc);
}
MT_CLONES void add_rows_block(BF16* dst, const BF16* d_out, const int32_t* sources, int64_t count,
                              int64_t channels, float* acc) {
  add_rows(dst, d_out, sources, count, channels, acc);
}

template <typename T>
void backward_as(const Tensor& d_table, const Tensor& d_out, const Tensor& ids,
                 int64_t vocab_start) {
  const int64_t vocab = d_table.dim(0), channels = d_table.dim(1), count = ids.numel();
  const int32_t* id = ids.data<int32_t>();
  // Group the positions by table row (a counting sort, stable: each row's positions ascend), so
  // that each row is written by one thread and receives its rows of d_out in position order.
  int32_t* start = thread_scratch<int32_t>(static_cast<size_t>(vocab + 1));
  int32_t* sources = thread_scratch<int32_t>(static_cast<size_t>(count), 1);
  std::fill(start, start + vocab + 1, 0);
  for (int64_t n = 0; n < count; ++n) {
    const int64_t row = slice_row(id[n], vocab_start, vocab);
    if (row >= 0) ++start[row + 1];
  }
  for (int64_t v = 0; v < vocab; ++v) start[v + 1] += start[v];
  for (int64_t n = 0; n < count; ++n) {
    const int64_t row = slice_row(id[n], vocab_start, vocab);
    if (row >= 0) sources[start[row]++] = static_cast<int32_t>(n);
  }
  // start[v] is now the end of row v's positions, and start[v - 1] (or 0) their beginning.
  T* table = d_table.data<T>();
  const T* dy = d_out.data<T>();
  parallel_for(vocab, std::max<int64_t>(row_grain(channels), 1), [&](int64_t first, int64_t last) {
    float* acc = thread_scratch<float>(static_cast<size_t>(channels));
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = v ? start[v - 1] : 0, end = start[v];
      if (begin < end)
        add_rows_block(table + v * channels, dy, sources + begin, end - begin, channels, acc);
    }
  });
}
}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table,
                       int64_t vocab_start) {
  const int64_t vocab = table.dim(0), channels = table.dim(1);
  const int64_t row_bytes = channels * static_cast<int64_t>(dtype_size(table.dtype()));
  const int32_t* id = ids.data<int32_t>();
  const auto* src = static_cast<const char*>(table.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  parallel_for(ids.numel(), row_grain(channels), [&](int64_t first, int64_t last) {
    for (int64_t n = first; n < last; ++n) {
      const int64_t row = slice_row(id[n], vocab_start, vocab);
      if (row < 0)
        std::memset(dst + n * row_bytes, 0, static_cast<size_t>(row_bytes));
      else
        std::memcpy(dst + n * row_bytes, src + row * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids,
                        int64_t vocab_start) {
  if (d_table.dtype() == DType::bf16) return backward_as<BF16>(d_table, d_out, ids, vocab_start);
  backward_as<float>(d_table, d_out, ids, vocab_start);
}

}  // namespace meshtrain::ops::cpu

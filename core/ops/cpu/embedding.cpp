// Token embedding lookup and its scatter-add backward.
#include <algorithm>

#include "core/error.h"
#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

namespace {
// Ids are data, so only the kernel that reads them can check their range.
int64_t checked_id(const int32_t* ids, int64_t n, int64_t vocab, const char* op) {
  const int64_t id = ids[n];
  MT_CHECK(id >= 0 && id < vocab, op, ": ids[", n, "] = ", id, " is outside the table's [0, ",
           vocab, ")");
  return id;
}
}  // namespace

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table) {
  const int64_t vocab = table.dim(0), channels = table.dim(1);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n) {
    const float* row =
        table.data<float>() + checked_id(id, n, vocab, "embedding_forward") * channels;
    std::copy(row, row + channels, out.data<float>() + n * channels);
  }
}

void embedding_backward(const Tensor& d_table, const Tensor& d_out, const Tensor& ids) {
  const int64_t vocab = d_table.dim(0), channels = d_table.dim(1);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t n = 0; n < ids.numel(); ++n) {
    float* row = d_table.data<float>() + checked_id(id, n, vocab, "embedding_backward") * channels;
    const float* dy = d_out.data<float>() + n * channels;
    for (int64_t c = 0; c < channels; ++c) row[c] += dy[c];
  }
}

}  // namespace meshtrain::ops::cpu

#include "meshtrain/models/decoder_kernels.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "meshtrain/core/error.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

Tensor decoder_host_value(const Parameter& p, std::string_view decoder) {
  const std::string& name = p.name();
  MT_CHECK(p.available(), decoder, ": parameter '", name, "' has no value on this rank");
  MT_CHECK(p.shape() == p.global_shape(), decoder, ": parameter '", name, "' is sharded (",
           shape_string(p.shape()), " of ", shape_string(p.global_shape()),
           "); the decoder needs the whole model on this rank");
  const Tensor& value = p.value();
  MT_CHECK(value.dtype() == DType::f32, decoder, ": parameter '", name, "' must be f32, got ",
           value.describe());
  MemoryCategoryScope scope(MemoryCategory::param);  // charged only when it copies
  return value.on(Device::cpu());
}

void causal_softmax_row(float* row, int64_t seen, int64_t count) {
  const float max = *std::max_element(row, row + seen);
  float sum = 0.0f;
  for (int64_t j = 0; j < seen; ++j) {
    row[j] = std::exp(row[j] - max);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < seen; ++j) row[j] *= inv;
  std::fill(row + seen, row + count, 0.0f);
}

}  // namespace meshtrain

// Elementwise kernels: residual add, axpy, scaling, the squared norm and dtype casts.
#include <algorithm>
#include <cstring>

#include "core/bf16.h"
#include "core/ops/cpu/cpu_ops.h"

namespace meshtrain::ops::cpu {

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) z[i] = x[i] + y[i];
}

void axpy(const Tensor& y, float alpha, const Tensor& x) {
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) dst[i] += alpha * src[i];
}

void scale(const Tensor& x, float alpha) {
  float* data = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) data[i] *= alpha;
}

double sum_squares(const Tensor& x) {
  const float* data = x.data<float>();
  double sum = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += static_cast<double>(data[i]) * data[i];
  return sum;
}

void cast(const Tensor& out, const Tensor& in) {
  if (out.dtype() == in.dtype()) {
    if (in.nbytes()) std::memmove(out.raw_data(), in.raw_data(), in.nbytes());
  } else if (out.dtype() == DType::bf16) {
    const float* src = in.data<float>();
    BF16* dst = out.data<BF16>();
    for (int64_t i = 0; i < in.numel(); ++i) dst[i] = to_bf16(src[i]);
  } else {
    const BF16* src = in.data<BF16>();
    float* dst = out.data<float>();
    for (int64_t i = 0; i < in.numel(); ++i) dst[i] = to_f32(src[i]);
  }
}

}  // namespace meshtrain::ops::cpu

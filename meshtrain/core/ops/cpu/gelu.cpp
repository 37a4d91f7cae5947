// GELU with the tanh approximation used by GPT-2, its tanh vectorised (fast_tanh.h), in f32 over
// f32 or bf16 storage.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/fast_tanh.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
constexpr int64_t kGrain = 16384;  // elements per thread at least

template <typename T>
MT_INLINE void forward(const T* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = load(in[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    store(out[i], 0.5f * x * (1.0f + fast_tanh(u)));
  }
}

template <typename T>
MT_INLINE void backward(const T* in, const T* d_out, T* d_in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = load(in[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = fast_tanh(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    store(d_in[i], load(d_out[i]) * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du));
  }
}

MT_CLONES void forward_block(const float* in, float* out, int64_t n) { forward(in, out, n); }
MT_CLONES void forward_block(const BF16* in, BF16* out, int64_t n) { forward(in, out, n); }
MT_CLONES void backward_block(const float* in, const float* d_out, float* d_in, int64_t n) {
  backward(in, d_out, d_in, n);
}
MT_CLONES void backward_block(const BF16* in, const BF16* d_out, BF16* d_in, int64_t n) {
  backward(in, d_out, d_in, n);
}

template <typename T>
void gelu_forward_as(const Tensor& out, const Tensor& in) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  parallel_for(in.numel(), kGrain, [&](int64_t begin, int64_t end) {
    forward_block(x + begin, y + begin, end - begin);
  });
}

template <typename T>
void gelu_backward_as(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
  const T* x = in.data<T>();
  const T* dy = d_out.data<T>();
  T* dx = d_in.data<T>();
  parallel_for(in.numel(), kGrain, [&](int64_t begin, int64_t end) {
    backward_block(x + begin, dy + begin, dx + begin, end - begin);
  });
}
}  // namespace

void gelu_forward(const Tensor& out, const Tensor& in) {
  if (in.dtype() == DType::bf16) return gelu_forward_as<BF16>(out, in);
  gelu_forward_as<float>(out, in);
}

void gelu_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
  if (in.dtype() == DType::bf16) return gelu_backward_as<BF16>(d_in, d_out, in);
  gelu_backward_as<float>(d_in, d_out, in);
}

}  // namespace meshtrain::ops::cpu

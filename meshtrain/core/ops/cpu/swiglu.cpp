// SwiGLU, Llama's gated MLP activation: out = silu(gate) * up, elementwise in f32 over f32 or bf16
// storage. The sigmoid's exponential is fast_exp (fast_exp.h), so that the loops vectorise.
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/fast_exp.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
constexpr int64_t kGrain = 16384;  // elements per thread at least

// 1 / (1 + e^-g): e^-g overflows to inf for g < -88.7, giving 0 as it should.
MT_INLINE float sigmoid(float g) { return 1.0f / (1.0f + fast_exp(-g)); }

template <typename T>
MT_INLINE void forward(const T* gate, const T* up, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate[i]);
    store(out[i], g * sigmoid(g) * load(up[i]));
  }
}

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
template <typename T>
MT_INLINE void backward(const T* gate, const T* up, const T* d_out, T* d_gate, T* d_up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = load(gate[i]), dy = load(d_out[i]);
    const float s = sigmoid(g);
    store(d_gate[i], dy * load(up[i]) * s * (1.0f + g * (1.0f - s)));
    store(d_up[i], dy * g * s);
  }
}

MT_CLONES void forward_block(const float* gate, const float* up, float* out, int64_t n) {
  forward(gate, up, out, n);
}
MT_CLONES void forward_block(const BF16* gate, const BF16* up, BF16* out, int64_t n) {
  forward(gate, up, out, n);
}
MT_CLONES void backward_block(const float* gate, const float* up, const float* d_out, float* d_gate,
                              float* d_up, int64_t n) {
  backward(gate, up, d_out, d_gate, d_up, n);
}
MT_CLONES void backward_block(const BF16* gate, const BF16* up, const BF16* d_out, BF16* d_gate,
                              BF16* d_up, int64_t n) {
  backward(gate, up, d_out, d_gate, d_up, n);
}

template <typename T>
void forward_as(const Tensor& out, const Tensor& gate, const Tensor& up) {
  const T* g = gate.data<T>();
  const T* u = up.data<T>();
  T* y = out.data<T>();
  parallel_for(gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
    forward_block(g + begin, u + begin, y + begin, end - begin);
  });
}

template <typename T>
void backward_as(const Tensor& d_gate, const Tensor& d_up, const Tensor& d_out, const Tensor& gate,
                 const Tensor& up) {
  const T* g = gate.data<T>();
  const T* u = up.data<T>();
  const T* dy = d_out.data<T>();
  T* dg = d_gate.data<T>();
  T* du = d_up.data<T>();
  parallel_for(gate.numel(), kGrain, [&](int64_t begin, int64_t end) {
    backward_block(g + begin, u + begin, dy + begin, dg + begin, du + begin, end - begin);
  });
}
}  // namespace

void swiglu_forward(const Tensor& out, const Tensor& gate, const Tensor& up) {
  if (gate.dtype() == DType::bf16) return forward_as<BF16>(out, gate, up);
  forward_as<float>(out, gate, up);
}

void swiglu_backward(const Tensor& d_gate, const Tensor& d_up, const Tensor& d_out,
                     const Tensor& gate, const Tensor& up) {
  if (gate.dtype() == DType::bf16) return backward_as<BF16>(d_gate, d_up, d_out, gate, up);
  backward_as<float>(d_gate, d_up, d_out, gate, up);
}

}  // namespace meshtrain::ops::cpu

// SwiGLU, Llama's gated MLP activation: out = silu(gate) * up, forward and backward, elementwise.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// 1 / (1 + e^-g): e^-g overflows to inf for g < -88.7, giving 0 as it should.
__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename T>
struct SwigluForward {
  T* out;
  const T* gate;
  const T* up;
  __device__ void operator()(int64_t i) const {
    const float g = as_float(gate[i]);
    out[i] = from_float<T>(g * sigmoid(g) * as_float(up[i]));
  }
};

// d silu(g) / dg = s (1 + g (1 - s)) with s = sigmoid(g).
template <typename T>
struct SwigluBackward {
  T* d_gate;
  T* d_up;
  const T* d_out;
  const T* gate;
  const T* up;
  __device__ void operator()(int64_t i) const {
    const float g = as_float(gate[i]), dy = as_float(d_out[i]);
    const float s = sigmoid(g);
    d_gate[i] = from_float<T>(dy * as_float(up[i]) * s * (1.0f + g * (1.0f - s)));
    d_up[i] = from_float<T>(dy * g * s);
  }
};

}  // namespace

void swiglu_forward(const Tensor& out, const Tensor& gate, const Tensor& up) {
  use_device(out);
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(gate.numel(), SwigluForward<T>{ptr<T>(out), ptr<T>(gate), ptr<T>(up)});
  });
}

void swiglu_backward(const Tensor& d_gate, const Tensor& d_up, const Tensor& d_out,
                     const Tensor& gate, const Tensor& up) {
  use_device(d_gate);
  dispatch_float(gate.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(gate.numel(), SwigluBackward<T>{ptr<T>(d_gate), ptr<T>(d_up), ptr<T>(d_out),
                                                       ptr<T>(gate), ptr<T>(up)});
  });
}

}  // namespace meshtrain::ops::cuda

// GELU with the tanh approximation, forward and backward, elementwise.
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <typename T>
struct GeluForward {
  T* out;
  const T* in;
  __device__ void operator()(int64_t i) const {
    const float x = as_float(in[i]);
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = from_float<T>(0.5f * x * (1.0f + tanhf(u)));
  }
};

// d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx.
template <typename T>
struct GeluBackward {
  T* d_in;
  const T* d_out;
  const T* in;
  __device__ void operator()(int64_t i) const {
    const float x = as_float(in[i]);
    const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    d_in[i] = from_float<T>(grad * as_float(d_out[i]));
  }
};

}  // namespace

void gelu_forward(const Tensor& out, const Tensor& in) {
  use_device(out);
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(in.numel(), GeluForward<T>{ptr<T>(out), ptr<T>(in)});
  });
}

void gelu_backward(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
  use_device(d_in);
  dispatch_float(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(in.numel(), GeluBackward<T>{ptr<T>(d_in), ptr<T>(d_out), ptr<T>(in)});
  });
}

}  // namespace meshtrain::ops::cuda

// Elementwise kernels (residual add, axpy, scale, casts) and the double-precision sum of squares.
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

template <typename T>
struct Add {
  T* out;
  const T* a;
  const T* b;
  __device__ void operator()(int64_t i) const {
    out[i] = from_float<T>(as_float(a[i]) + as_float(b[i]));
  }
};

template <typename T>
struct Axpy {
  T* y;
  const T* x;
  float alpha;
  __device__ void operator()(int64_t i) const {
    y[i] = from_float<T>(as_float(y[i]) + alpha * as_float(x[i]));
  }
};

template <typename T>
struct Scale {
  T* x;
  float alpha;
  __device__ void operator()(int64_t i) const { x[i] = from_float<T>(alpha * as_float(x[i])); }
};

template <typename Out, typename In>
struct Convert {
  Out* out;
  const In* in;
  __device__ void operator()(int64_t i) const { out[i] = from_float<Out>(as_float(in[i])); }
};

// Element i of a window `cols` wide over rows of out_row and in_row elements.
template <typename Out, typename In>
struct ConvertColumns {
  Out* out;
  int64_t out_row;
  const In* in;
  int64_t in_row;
  int64_t cols;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / cols, c = i % cols;
    out[r * out_row + c] = from_float<Out>(as_float(in[r * in_row + c]));
  }
};

// Pass one: each block's partial sum, accumulated in double; pass two adds the partials in a fixed
// order, so the result does not depend on scheduling.
constexpr int kSumBlocks = 1024;

template <typename T>
__global__ void sum_squares_partial_kernel(double* partial, const T* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = as_float(x[i]);
    acc += v * v;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(double* total, const double* partial, int count) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *total = acc;
}

}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  use_device(out);
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(out.numel(), Add<T>{ptr<T>(out), ptr<T>(a), ptr<T>(b)});
  });
}

void axpy(const Tensor& y, float alpha, const Tensor& x) {
  use_device(y);
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(y.numel(), Axpy<T>{ptr<T>(y), ptr<T>(x), alpha});
  });
}

void scale(const Tensor& x, float alpha) {
  use_device(x);
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_elementwise(x.numel(), Scale<T>{ptr<T>(x), alpha});
  });
}

// Every tensor's partial sums go into one buffer, which one kernel adds up in a fixed order: one
// figure comes back, after one wait, however many tensors there are.
double sum_squares(const std::vector<Tensor>& xs) {
  std::vector<int> blocks;
  int64_t all_blocks = 0;
  for (const Tensor& x : xs) {
    const int64_t n = x.numel();
    blocks.push_back(n == 0 ? 0 : static_cast<int>(std::min<int64_t>(grid_size(n), kSumBlocks)));
    all_blocks += blocks.back();
  }
  if (all_blocks == 0) return 0.0;
  const Tensor& first = xs.front();
  use_device(first);
  Scratch partial(first, (static_cast<size_t>(all_blocks) + 1) * sizeof(double));
  double* next = partial.as<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (blocks[i] == 0) continue;
    dispatch_float(xs[i].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      sum_squares_partial_kernel<<<blocks[i], kBlockSize, 0, stream()>>>(next, ptr<T>(xs[i]),
                                                                         xs[i].numel());
      MT_CUDA_CHECK_LAUNCH("sum_squares_partial_kernel");
    });
    next += blocks[i];
  }
  double* total = next;
  sum_partials_kernel<<<1, kSumBlocks, 0, stream()>>>(total, partial.as<double>(),
                                                      static_cast<int>(all_blocks));
  MT_CUDA_CHECK_LAUNCH("sum_partials_kernel");
  double result = 0.0;
  device_memcpy(&result, Device::cpu(), total, first.device(), sizeof(double));  // bounded waits
  return result;
}

void cast(const Tensor& out, const Tensor& in) {
  use_device(out);
  if (in.numel() == 0) return;
  if (out.dtype() == in.dtype()) {
    MT_CUDA_CHECK(cudaMemcpyAsync(out.raw_data(), in.raw_data(), in.nbytes(),
                                  cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  dispatch_float(out.dtype(), [&](auto out_tag) {
    dispatch_float(in.dtype(), [&](auto in_tag) {
      using Out = typename decltype(out_tag)::type;
      using In = typename decltype(in_tag)::type;
      launch_elementwise(in.numel(), Convert<Out, In>{ptr<Out>(out), ptr<In>(in)});
    });
  });
}

void cast_columns(const Tensor& out, int64_t out_col, const Tensor& in, int64_t in_col,
                  int64_t cols) {
  use_device(out);
  const int64_t rows = in.dim(0);
  if (rows == 0 || cols == 0) return;
  if (out.dtype() == in.dtype()) {
    const size_t size = dtype_size(in.dtype());
    MT_CUDA_CHECK(
        cudaMemcpy2DAsync(static_cast<char*>(out.raw_data()) + out_col * size, out.dim(1) * size,
                          static_cast<const char*>(in.raw_data()) + in_col * size, in.dim(1) * size,
                          cols * size, rows, cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  dispatch_float(out.dtype(), [&](auto out_tag) {
    dispatch_float(in.dtype(), [&](auto in_tag) {
      using Out = typename decltype(out_tag)::type;
      using In = typename decltype(in_tag)::type;
      launch_elementwise(rows * cols,
                         ConvertColumns<Out, In>{ptr<Out>(out) + out_col, out.dim(1),
                                                 ptr<In>(in) + in_col, in.dim(1), cols});
    });
  });
}

}  // namespace meshtrain::ops::cuda

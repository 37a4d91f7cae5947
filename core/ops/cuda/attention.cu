// Causal multi-head self-attention. For each sequence, cuBLAS runs one strided batch over the heads
// for every product (scores Q K^T, out P V and their gradients), straight on the strided head views
// of qkv [B, T, 3C]; warp-per-row kernels do the causal softmax and its backward. probs stays f32;
// with bf16 activations a bf16 copy of P (and of dS) feeds the GEMMs, as cuBLAS wants both
// operands of one type.
#include <cmath>

#include "core/ops/cuda/cuda_ops.h"
#include "core/ops/cuda/gemm.h"
#include "core/ops/cuda/kernel_utils.cuh"

namespace meshtrain::ops::cuda {

namespace {

// Sizes and head views. Element offsets; head h of sequence b starts at qkv_offset(b) + h * hs.
struct AttentionDims {
  int64_t batch, seq, channels, heads, head_dim;
  AttentionDims(const Tensor& qkv, int num_heads)
      : batch(qkv.dim(0)),
        seq(qkv.dim(1)),
        channels(qkv.dim(2) / 3),
        heads(num_heads),
        head_dim(channels / num_heads) {}
  int64_t qkv_offset(int64_t b) const { return b * seq * 3 * channels; }
  int64_t out_offset(int64_t b) const { return b * seq * channels; }
  int64_t probs_offset(int64_t b) const { return b * heads * seq * seq; }
  int64_t rows() const { return batch * heads * seq; }  // softmax rows
};

void* at(const Tensor& t, int64_t offset) {
  return static_cast<char*>(t.raw_data()) + offset * static_cast<int64_t>(dtype_size(t.dtype()));
}

// All heads of one sequence as a GEMM batch: row stride ld, consecutive heads head_dim apart.
GemmMatrix head_views(void* first, DType dtype, int64_t ld, int64_t head_dim) {
  return {first, dtype, ld, head_dim};
}
// The T x T matrices of one sequence, one per head.
GemmMatrix head_squares(void* first, DType dtype, int64_t seq) {
  return {first, dtype, seq, seq * seq};
}

// In place over each row t of the scaled scores: softmax over keys 0..t, zero for later keys.
// Also writes the bf16 copy when asked (probs_bf16 not null).
__global__ void causal_softmax_kernel(float* probs, bf16* probs_bf16, int64_t rows, int64_t seq) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = row % seq;
  float* p = probs + row * seq;
  float max = -INFINITY;
  for (int64_t s = lane; s <= t; s += 32) max = fmaxf(max, p[s]);
  max = warp_max(max);
  float sum = 0.0f;
  for (int64_t s = lane; s <= t; s += 32) sum += expf(p[s] - max);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t s = lane; s < seq; s += 32) {
    const float value = s <= t ? expf(p[s] - max) * inv : 0.0f;
    p[s] = value;
    if (probs_bf16) probs_bf16[row * seq + s] = from_float<bf16>(value);
  }
}

// Softmax backward per row: dS = P * (dP - sum_s P dP); zero past the diagonal, where P = 0. Each
// lane reads and writes only its own columns, so d_scores may alias d_probs.
template <typename T>
__global__ void softmax_backward_kernel(T* d_scores, const float* d_probs, const float* probs,
                                        int64_t rows, int64_t seq) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t t = row % seq;
  const float* p = probs + row * seq;
  const float* dp = d_probs + row * seq;
  float dot = 0.0f;
  for (int64_t s = lane; s <= t; s += 32) dot += p[s] * dp[s];
  dot = warp_sum(dot);
  T* ds = d_scores + row * seq;
  for (int64_t s = lane; s < seq; s += 32)
    ds[s] = from_float<T>(s <= t ? p[s] * (dp[s] - dot) : 0.0f);
}

// Converts probs to bf16 for the backward GEMMs.
struct ToBf16 {
  bf16* out;
  const float* in;
  __device__ void operator()(int64_t i) const { out[i] = from_float<bf16>(in[i]); }
};

}  // namespace

void attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int num_heads) {
  use_device(out);
  const AttentionDims d(qkv, num_heads);
  if (d.rows() == 0) return;
  const DType dtype = qkv.dtype();
  const bool low = dtype == DType::bf16;
  const int64_t ld = 3 * d.channels, hs = d.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  float* p = ptr<float>(probs);
  for (int64_t b = 0; b < d.batch; ++b) {  // scores = scale * Q K^T, into probs
    gemm(d.seq, d.seq, hs, false, true, scale, head_views(at(qkv, d.qkv_offset(b)), dtype, ld, hs),
         head_views(at(qkv, d.qkv_offset(b) + d.channels), dtype, ld, hs), 0.0f,
         head_squares(p + d.probs_offset(b), DType::f32, d.seq), d.heads);
  }
  Scratch p_low(low ? static_cast<size_t>(probs.numel()) * sizeof(bf16) : 0);
  causal_softmax_kernel<<<warp_rows_grid(d.rows()), kBlockSize, 0, stream()>>>(p, p_low.as<bf16>(),
                                                                               d.rows(), d.seq);
  MT_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
  for (int64_t b = 0; b < d.batch; ++b) {  // out = P V
    void* p_b = low ? static_cast<void*>(p_low.as<bf16>() + d.probs_offset(b))
                    : static_cast<void*>(p + d.probs_offset(b));
    gemm(d.seq, hs, d.seq, false, false, 1.0f, head_squares(p_b, dtype, d.seq),
         head_views(at(qkv, d.qkv_offset(b) + 2 * d.channels), dtype, ld, hs), 0.0f,
         head_views(at(out, d.out_offset(b)), out.dtype(), d.channels, hs), d.heads);
  }
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        const Tensor& probs, int num_heads) {
  use_device(d_qkv);
  const AttentionDims d(qkv, num_heads);
  if (d.rows() == 0) return;
  const DType dtype = qkv.dtype();
  const bool low = dtype == DType::bf16;
  const int64_t ld = 3 * d.channels, hs = d.head_dim, c = d.channels;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* p = ptr<float>(probs);
  const size_t square_count = static_cast<size_t>(probs.numel());

  // P in the GEMM dtype, and dP (f32). dS overwrites dP in f32, or goes to its own bf16 buffer.
  Scratch p_low(low ? square_count * sizeof(bf16) : 0);
  if (low) launch_elementwise(probs.numel(), ToBf16{p_low.as<bf16>(), p});
  Scratch d_p(square_count * sizeof(float));
  Scratch d_s_low(low ? square_count * sizeof(bf16) : 0);
  auto p_at = [&](int64_t b) {
    return low ? static_cast<void*>(p_low.as<bf16>() + d.probs_offset(b))
               : static_cast<void*>(const_cast<float*>(p) + d.probs_offset(b));
  };
  auto d_s_at = [&](int64_t b) {
    return low ? static_cast<void*>(d_s_low.as<bf16>() + d.probs_offset(b))
               : static_cast<void*>(d_p.as<float>() + d.probs_offset(b));
  };

  for (int64_t b = 0; b < d.batch; ++b) {
    const GemmMatrix dy = head_views(at(d_out, d.out_offset(b)), dtype, c, hs);
    // out = P V: dP = dOut V^T, dV = P^T dOut.
    gemm(d.seq, d.seq, hs, false, true, 1.0f, dy,
         head_views(at(qkv, d.qkv_offset(b) + 2 * c), dtype, ld, hs), 0.0f,
         head_squares(d_p.as<float>() + d.probs_offset(b), DType::f32, d.seq), d.heads);
    gemm(d.seq, hs, d.seq, true, false, 1.0f, head_squares(p_at(b), dtype, d.seq), dy, 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b) + 2 * c), d_qkv.dtype(), ld, hs), d.heads);
  }
  dispatch_float(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_backward_kernel<<<warp_rows_grid(d.rows()), kBlockSize, 0, stream()>>>(
        static_cast<T*>(d_s_at(0)), d_p.as<float>(), p, d.rows(), d.seq);
    MT_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
  });
  for (int64_t b = 0; b < d.batch; ++b) {
    // S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
    const GemmMatrix d_s = head_squares(d_s_at(b), dtype, d.seq);
    gemm(d.seq, hs, d.seq, false, false, scale, d_s,
         head_views(at(qkv, d.qkv_offset(b) + c), dtype, ld, hs), 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b)), d_qkv.dtype(), ld, hs), d.heads);
    gemm(d.seq, hs, d.seq, true, false, scale, d_s,
         head_views(at(qkv, d.qkv_offset(b)), dtype, ld, hs), 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b) + c), d_qkv.dtype(), ld, hs), d.heads);
  }
}

}  // namespace meshtrain::ops::cuda

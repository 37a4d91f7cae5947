// Causal multi-head self-attention. For each sequence, cuBLAS runs one strided batch over the heads
// for every product (scores Q K^T, out P V and their gradients), straight on the strided head views
// of qkv [B, T, 3C]; warp-per-row kernels do the causal softmax and its backward. Scores and probs
// are f32; with bf16 activations a bf16 copy of P (and of dS) feeds the GEMMs, as cuBLAS wants both
// operands of one type.
//
// Memory: nothing of size T x T outlives a call. Forward keeps no probabilities; backward
// recomputes the scores S = scale Q K^T and the causal softmax P from qkv (which the layer keeps
// anyway) with the same GEMM and the same softmax kernel as forward, so P has the same bits. This
// is FlashAttention's memory trade (one more Q K^T product in backward instead of keeping the
// T x T probabilities), not its fused tiling: the T x T matrices of one sequence are still
// materialised, in per-sequence scratch [H, T, T] allocated once per call and reused for each
// sequence in turn (all work is ordered on one stream). At B = 8, H = 12, T = 1024 one f32
// [H, T, T] buffer is 50 MB (12 * 1024^2 * 4 bytes), each bf16 copy 25 MB: forward needs 50 MB of
// scratch (75 MB in bf16), backward 100 MB (probs and dP; 150 MB in bf16 with the copies of P and
// dS), where the [B, H, T, T] probs were 400 MB per layer, kept from forward to backward, and
// backward's batch-wide scratch another 400 MB (800 MB in bf16). The price is a second scores GEMM
// and softmax per sequence in backward, and B launches of each kernel instead of one.
#include <cmath>

#include "meshtrain/core/ops/cuda/cuda_ops.h"
#include "meshtrain/core/ops/cuda/gemm.h"
#include "meshtrain/core/ops/cuda/kernel_utils.cuh"

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
  int64_t rows() const { return batch * heads * seq; }  // softmax rows of the whole batch
  int64_t sequence_rows() const { return heads * seq; }  // softmax rows of one sequence
  size_t square_count() const {  // elements of one sequence's [H, T, T]
    return static_cast<size_t>(heads * seq * seq);
  }
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
// Also writes the bf16 copy when asked (probs_bf16 not null). Rows start at a sequence boundary,
// so row % seq is the query position.
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

// The per-sequence T x T buffers: probs (f32: the scores, then P in place) and, with bf16
// activations, the bf16 copy of P that the GEMMs read.
struct SequenceProbs {
  Scratch probs, probs_low;
  SequenceProbs(const Tensor& qkv, const AttentionDims& d, bool low)
      : probs(qkv, d.square_count() * sizeof(float)),
        probs_low(qkv, low ? d.square_count() * sizeof(bf16) : 0) {}
  // P as a GEMM operand in the activations' dtype.
  GemmMatrix operand(DType dtype, int64_t seq) const {
    return dtype == DType::bf16 ? head_squares(probs_low.as<bf16>(), dtype, seq)
                                : head_squares(probs.as<float>(), dtype, seq);
  }
};

// P of sequence b: scores = scale * Q K^T into sp.probs, then the causal softmax in place (and the
// bf16 copy). Forward and backward both call this, so backward's P has forward's bits.
void sequence_softmax(const AttentionDims& d, const Tensor& qkv, int64_t b, float scale,
                      const SequenceProbs& sp) {
  const DType dtype = qkv.dtype();
  const int64_t ld = 3 * d.channels, hs = d.head_dim;
  gemm(d.seq, d.seq, hs, false, true, scale, head_views(at(qkv, d.qkv_offset(b)), dtype, ld, hs),
       head_views(at(qkv, d.qkv_offset(b) + d.channels), dtype, ld, hs), 0.0f,
       head_squares(sp.probs.as<float>(), DType::f32, d.seq), d.heads);
  const int64_t rows = d.sequence_rows();
  causal_softmax_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
      sp.probs.as<float>(), sp.probs_low.as<bf16>(), rows, d.seq);
  MT_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
}

float score_scale(const AttentionDims& d) {
  return 1.0f / std::sqrt(static_cast<float>(d.head_dim));
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& qkv, int num_heads) {
  use_device(out);
  const AttentionDims d(qkv, num_heads);
  if (d.rows() == 0) return;
  const DType dtype = qkv.dtype();
  const int64_t ld = 3 * d.channels, hs = d.head_dim;
  const float scale = score_scale(d);
  const SequenceProbs sp(qkv, d, dtype == DType::bf16);
  for (int64_t b = 0; b < d.batch; ++b) {
    sequence_softmax(d, qkv, b, scale, sp);
    // out = P V.
    gemm(d.seq, hs, d.seq, false, false, 1.0f, sp.operand(dtype, d.seq),
         head_views(at(qkv, d.qkv_offset(b) + 2 * d.channels), dtype, ld, hs), 0.0f,
         head_views(at(out, d.out_offset(b)), out.dtype(), d.channels, hs), d.heads);
  }
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        int num_heads) {
  use_device(d_qkv);
  const AttentionDims d(qkv, num_heads);
  if (d.rows() == 0) return;
  const DType dtype = qkv.dtype();
  const bool low = dtype == DType::bf16;
  const int64_t ld = 3 * d.channels, hs = d.head_dim, c = d.channels;
  const float scale = score_scale(d);

  // P (recomputed) and dP, f32; dS overwrites dP in f32, or goes to its own bf16 buffer.
  const SequenceProbs sp(qkv, d, low);
  Scratch d_p(qkv, d.square_count() * sizeof(float));
  Scratch d_s_low(qkv, low ? d.square_count() * sizeof(bf16) : 0);
  void* d_s = low ? static_cast<void*>(d_s_low.as<bf16>()) : static_cast<void*>(d_p.as<float>());

  for (int64_t b = 0; b < d.batch; ++b) {
    sequence_softmax(d, qkv, b, scale, sp);
    const GemmMatrix p = sp.operand(dtype, d.seq);
    const GemmMatrix dy = head_views(at(d_out, d.out_offset(b)), dtype, c, hs);
    // out = P V: dP = dOut V^T, dV = P^T dOut.
    gemm(d.seq, d.seq, hs, false, true, 1.0f, dy,
         head_views(at(qkv, d.qkv_offset(b) + 2 * c), dtype, ld, hs), 0.0f,
         head_squares(d_p.as<float>(), DType::f32, d.seq), d.heads);
    gemm(d.seq, hs, d.seq, true, false, 1.0f, p, dy, 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b) + 2 * c), d_qkv.dtype(), ld, hs), d.heads);
    const int64_t rows = d.sequence_rows();
    dispatch_float(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_backward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
          static_cast<T*>(d_s), d_p.as<float>(), sp.probs.as<float>(), rows, d.seq);
      MT_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
    });
    // S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
    const GemmMatrix d_s_squares = head_squares(d_s, dtype, d.seq);
    gemm(d.seq, hs, d.seq, false, false, scale, d_s_squares,
         head_views(at(qkv, d.qkv_offset(b) + c), dtype, ld, hs), 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b)), d_qkv.dtype(), ld, hs), d.heads);
    gemm(d.seq, hs, d.seq, true, false, scale, d_s_squares,
         head_views(at(qkv, d.qkv_offset(b)), dtype, ld, hs), 0.0f,
         head_views(at(d_qkv, d.qkv_offset(b) + c), d_qkv.dtype(), ld, hs), d.heads);
  }
}

}  // namespace meshtrain::ops::cuda

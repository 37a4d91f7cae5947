// Causal self-attention, multi-head (packed qkv [B, T, 3C], GPT-2's) and grouped-query (separate
// q, k, v, Llama's) on one implementation: every operand is a strided view (first element, row
// stride), and query head h attends with key/value head h / group (group 1 for the packed op). For
// each sequence, cuBLAS runs strided batches straight on those head views for every product
// (scores Q K^T, out P V and their gradients): one batch over the key/value heads per query head
// of a group (query heads j, j + group, ...; a single batch over all heads when group is 1), dK
// and dV adding up over the passes; warp-per-row kernels do the causal softmax and its backward.
// Scores and probs are f32; with bf16 activations a bf16 copy of P (and of dS) feeds the GEMMs, as
// cuBLAS wants both operands of one type.
//
// Memory: nothing of size T x T outlives a call. Forward keeps no probabilities; backward
// recomputes the scores S = scale Q K^T and the causal softmax P from q and k (which the layer
// keeps anyway) with the same GEMMs and the same softmax kernel as forward, so P has the same bits.
// This is FlashAttention's memory trade (one more Q K^T product in backward instead of keeping the
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

// Sizes. Query head h attends with key/value head h / group(); the T x T matrices of one sequence
// are [H, T, T], one per query head.
struct AttentionDims {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t group() const { return heads / kv_heads; }
  int64_t rows() const { return batch * heads * seq; }  // softmax rows of the whole batch
  int64_t sequence_rows() const { return heads * seq; }  // softmax rows of one sequence
  size_t square_count() const {  // elements of one sequence's [H, T, T]
    return static_cast<size_t>(heads * seq * seq);
  }
};

// One [B, T, *] operand (q, k, v, out or a gradient): its first element, dtype and row stride.
// Packed qkv [B, T, 3C] gives three of these, C apart, with row stride 3C.
struct RowsView {
  void* data;
  DType dtype;
  int64_t ld;
  // Heads first, first + step, first + 2 step, ... of sequence b as a GEMM batch.
  GemmMatrix heads(const AttentionDims& d, int64_t b, int64_t first, int64_t step) const {
    const int64_t offset = b * d.seq * ld + first * d.head_dim;
    return {static_cast<char*>(data) + offset * static_cast<int64_t>(dtype_size(dtype)), dtype, ld,
            step * d.head_dim};
  }
  // All key/value heads of sequence b, one per GEMM batch entry.
  GemmMatrix kv_heads(const AttentionDims& d, int64_t b) const { return heads(d, b, 0, 1); }
};

RowsView rows_of(const Tensor& t, int64_t offset, int64_t ld) {
  return {static_cast<char*>(t.raw_data()) + offset * static_cast<int64_t>(dtype_size(t.dtype())),
          t.dtype(), ld};
}
RowsView rows_of(const Tensor& t) { return rows_of(t, 0, t.dim(2)); }

// Query heads j, j + group, j + 2 group, ...: one per key/value head, the GEMM batch of the j-th
// pass over a group (their q rows group * head_dim apart).
GemmMatrix group_queries(const RowsView& rows, const AttentionDims& d, int64_t b, int64_t j) {
  return rows.heads(d, b, j, d.group());
}
// The T x T matrices of those query heads in one sequence's [H, T, T] buffer.
GemmMatrix group_squares(void* first, DType dtype, const AttentionDims& d, int64_t j) {
  const int64_t square = d.seq * d.seq;
  return {static_cast<char*>(first) + j * square * static_cast<int64_t>(dtype_size(dtype)), dtype,
          d.seq, d.group() * square};
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
  SequenceProbs(const Tensor& like, const AttentionDims& d, bool low)
      : probs(like, d.square_count() * sizeof(float)),
        probs_low(like, low ? d.square_count() * sizeof(bf16) : 0) {}
  // P of the j-th pass's query heads as a GEMM operand in the activations' dtype.
  GemmMatrix operand(DType dtype, const AttentionDims& d, int64_t j) const {
    return dtype == DType::bf16 ? group_squares(probs_low.as<bf16>(), dtype, d, j)
                                : group_squares(probs.as<float>(), dtype, d, j);
  }
};

// P of sequence b: scores = scale * Q K^T into sp.probs, one strided batch over the key/value
// heads per query head of a group, then the causal softmax in place (and the bf16 copy). Forward
// and backward both call this, so backward's P has forward's bits.
void sequence_softmax(const AttentionDims& d, const RowsView& q, const RowsView& k, int64_t b,
                      float scale, const SequenceProbs& sp) {
  for (int64_t j = 0; j < d.group(); ++j)
    gemm(d.seq, d.seq, d.head_dim, false, true, scale, group_queries(q, d, b, j), k.kv_heads(d, b),
         0.0f, group_squares(sp.probs.as<float>(), DType::f32, d, j), d.kv_heads);
  const int64_t rows = d.sequence_rows();
  causal_softmax_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
      sp.probs.as<float>(), sp.probs_low.as<bf16>(), rows, d.seq);
  MT_CUDA_CHECK_LAUNCH("causal_softmax_kernel");
}

float score_scale(const AttentionDims& d) {
  return 1.0f / std::sqrt(static_cast<float>(d.head_dim));
}

// `like`: an input tensor, for the device and dtype of the scratch.
void forward(const AttentionDims& d, const RowsView& out, const RowsView& q, const RowsView& k,
             const RowsView& v, const Tensor& like) {
  if (d.rows() == 0) return;
  const DType dtype = like.dtype();
  const float scale = score_scale(d);
  const SequenceProbs sp(like, d, dtype == DType::bf16);
  for (int64_t b = 0; b < d.batch; ++b) {
    sequence_softmax(d, q, k, b, scale, sp);
    // out = P V.
    for (int64_t j = 0; j < d.group(); ++j)
      gemm(d.seq, d.head_dim, d.seq, false, false, 1.0f, sp.operand(dtype, d, j), v.kv_heads(d, b),
           0.0f, group_queries(out, d, b, j), d.kv_heads);
  }
}

// dK and dV of a key/value head sum over the query heads of its group: the j-th pass writes them
// with beta = 0, the later ones add (beta = 1).
void backward(const AttentionDims& d, const RowsView& d_q, const RowsView& d_k, const RowsView& d_v,
              const RowsView& d_out, const RowsView& q, const RowsView& k, const RowsView& v,
              const Tensor& like) {
  if (d.rows() == 0) return;
  const DType dtype = like.dtype();
  const bool low = dtype == DType::bf16;
  const float scale = score_scale(d);

  // P (recomputed) and dP, f32; dS overwrites dP in f32, or goes to its own bf16 buffer.
  const SequenceProbs sp(like, d, low);
  Scratch d_p(like, d.square_count() * sizeof(float));
  Scratch d_s_low(like, low ? d.square_count() * sizeof(bf16) : 0);
  void* d_s = low ? static_cast<void*>(d_s_low.as<bf16>()) : static_cast<void*>(d_p.as<float>());

  for (int64_t b = 0; b < d.batch; ++b) {
    sequence_softmax(d, q, k, b, scale, sp);
    // out = P V: dP = dOut V^T, dV += P^T dOut.
    for (int64_t j = 0; j < d.group(); ++j) {
      const GemmMatrix dy = group_queries(d_out, d, b, j);
      gemm(d.seq, d.seq, d.head_dim, false, true, 1.0f, dy, v.kv_heads(d, b), 0.0f,
           group_squares(d_p.as<float>(), DType::f32, d, j), d.kv_heads);
      gemm(d.seq, d.head_dim, d.seq, true, false, 1.0f, sp.operand(dtype, d, j), dy,
           j == 0 ? 0.0f : 1.0f, d_v.kv_heads(d, b), d.kv_heads);
    }
    const int64_t rows = d.sequence_rows();
    dispatch_float(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_backward_kernel<<<warp_rows_grid(rows), kBlockSize, 0, stream()>>>(
          static_cast<T*>(d_s), d_p.as<float>(), sp.probs.as<float>(), rows, d.seq);
      MT_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
    });
    // S = scale Q K^T: dQ = scale dS K, dK += scale dS^T Q.
    for (int64_t j = 0; j < d.group(); ++j) {
      const GemmMatrix d_s_squares = group_squares(d_s, dtype, d, j);
      gemm(d.seq, d.head_dim, d.seq, false, false, scale, d_s_squares, k.kv_heads(d, b), 0.0f,
           group_queries(d_q, d, b, j), d.kv_heads);
      gemm(d.seq, d.head_dim, d.seq, true, false, scale, d_s_squares, group_queries(q, d, b, j),
           j == 0 ? 0.0f : 1.0f, d_k.kv_heads(d, b), d.kv_heads);
    }
  }
}

// The packed layout: q, k, v side by side in each row of qkv [B, T, 3C], one key/value head per
// query head.
AttentionDims packed_dims(const Tensor& qkv, int num_heads) {
  const int64_t channels = qkv.dim(2) / 3;
  return {qkv.dim(0), qkv.dim(1), num_heads, num_heads, channels / num_heads};
}
RowsView packed_part(const Tensor& qkv, int part) {
  const int64_t channels = qkv.dim(2) / 3;
  return rows_of(qkv, part * channels, 3 * channels);
}

AttentionDims grouped_dims(const Tensor& q, int num_heads, int num_kv_heads) {
  return {q.dim(0), q.dim(1), num_heads, num_kv_heads, q.dim(2) / num_heads};
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& qkv, int num_heads) {
  use_device(out);
  forward(packed_dims(qkv, num_heads), rows_of(out), packed_part(qkv, 0), packed_part(qkv, 1),
          packed_part(qkv, 2), qkv);
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        int num_heads) {
  use_device(d_qkv);
  backward(packed_dims(qkv, num_heads), packed_part(d_qkv, 0), packed_part(d_qkv, 1),
           packed_part(d_qkv, 2), rows_of(d_out), packed_part(qkv, 0), packed_part(qkv, 1),
           packed_part(qkv, 2), qkv);
}

void grouped_attention_forward(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                               int num_heads, int num_kv_heads) {
  use_device(out);
  forward(grouped_dims(q, num_heads, num_kv_heads), rows_of(out), rows_of(q), rows_of(k),
          rows_of(v), q);
}

void grouped_attention_backward(const Tensor& d_q, const Tensor& d_k, const Tensor& d_v,
                                const Tensor& d_out, const Tensor& q, const Tensor& k,
                                const Tensor& v, int num_heads, int num_kv_heads) {
  use_device(d_q);
  backward(grouped_dims(q, num_heads, num_kv_heads), rows_of(d_q), rows_of(d_k), rows_of(d_v),
           rows_of(d_out), rows_of(q), rows_of(k), rows_of(v), q);
}

}  // namespace meshtrain::ops::cuda

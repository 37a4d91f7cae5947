// Causal self-attention, multi-head (packed qkv [B, T, 3C], GPT-2's) and grouped-query (separate
// q, k, v, Llama's) on one implementation: every operand is a strided view (first element, row
// stride), and query head h attends with key/value head h / group (group 1 for the packed op). Per
// head the score and value products are GEMMs over those views, into a T x T scratch buffer of the
// thread; backward recomputes the scores and the softmax the same way (the same bits), so no
// probabilities are kept between the passes. Forward splits the (batch, query head) pairs across
// the calling thread's CPU threads, backward the (batch, key/value head) pairs, so that the query
// heads summing into one dK / dV run on one thread. The softmax rows are vectorised (simd.h,
// fast_exp.h). bf16 operands are widened per head into f32 scratch for the f32 GEMMs and rounded
// back.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "meshtrain/core/ops/cpu/blas.h"
#include "meshtrain/core/ops/cpu/cpu_ops.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/ops/cpu/fast_exp.h"
#include "meshtrain/core/ops/cpu/parallel.h"
#include "meshtrain/core/ops/cpu/simd.h"

namespace meshtrain::ops::cpu {

namespace {
// Sizes shared by forward and backward. Query head h attends with key/value head h / group().
struct AttentionDims {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t group() const { return heads / kv_heads; }
  int64_t square() const { return seq * seq; }
  int64_t head_block() const { return seq * head_dim; }
};

// One [B, T, *] operand (q, k, v, out or a gradient): its first element and its row stride. Head h
// of sequence b starts at head(b, h). Packed qkv [B, T, 3C] gives three of these, C apart, with
// row stride 3C.
template <typename T>
struct RowsView {
  T* data;
  int64_t ld;
  T* head(const AttentionDims& d, int64_t b, int64_t h) const {
    return data + b * d.seq * ld + h * d.head_dim;
  }
};

// A head as an f32 [T, head_dim] matrix with a row stride, as the GEMMs take it.
struct Matrix {
  float* data;
  int64_t ld;
};

// Row t's keys 0..t rounded up to whole lanes (at most seq): the row loops below run over these,
// with -inf scores (e^-inf = 0) or zero probabilities in the padding, so that they need no scalar
// tails.
int64_t padded_keys(int64_t t, int64_t seq) {
  const int64_t lanes = LaneSum<>::kLanes;
  return std::min(seq, (t + lanes) / lanes * lanes);
}

// In place over the T x T scores of one head: row t becomes the softmax over keys 0..t, with zeros
// for the future keys.
MT_CLONES void causal_softmax_rows(float* scores, int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    float* row = scores + t * seq;
    const int64_t keys = padded_keys(t, seq);
    for (int64_t j = t + 1; j < keys; ++j) row[j] = -std::numeric_limits<float>::infinity();
    const float max = lane_max(keys, [&](int64_t j) { return row[j]; });
    for (int64_t j = 0; j < keys; ++j) row[j] = fast_exp(row[j] - max);
    const float inv = 1.0f / lane_sum(keys, [&](int64_t j) { return row[j]; });
    for (int64_t j = 0; j < keys; ++j) row[j] *= inv;
    for (int64_t j = keys; j < seq; ++j) row[j] = 0.0f;
  }
}

// In place over dP of one head: dS = P * (dP - sum_j P dP) per row; masked entries (P = 0) are 0.
MT_CLONES void softmax_backward_rows(const float* probs, float* d_scores, int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    const float* p = probs + t * seq;
    float* ds = d_scores + t * seq;
    const int64_t keys = padded_keys(t, seq);
    const float dot = lane_sum(keys, [&](int64_t j) { return p[j] * ds[j]; });
    for (int64_t j = 0; j < keys; ++j) ds[j] = p[j] * (ds[j] - dot);
    for (int64_t j = keys; j < seq; ++j) ds[j] = 0.0f;
  }
}

// rows x cols of a strided bf16 matrix to a packed f32 one, and back.
MT_CLONES void widen(const BF16* src, int64_t ld_src, float* dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = load(src[r * ld_src + c]);
}
MT_CLONES void narrow(const float* src, BF16* dst, int64_t ld_dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ld_dst + c] = round_bf16(src[r * cols + c]);
}

// Head (b, h) of an input operand as f32: in place for f32 storage; for bf16 widened into `block`
// (T x head_dim of scratch).
template <typename T>
Matrix read_head(const RowsView<T>& rows, const AttentionDims& d, int64_t b, int64_t h,
                 float* block) {
  if constexpr (std::is_same_v<T, float>) {
    return {rows.head(d, b, h), rows.ld};
  } else {
    widen(rows.head(d, b, h), rows.ld, block, d.seq, d.head_dim);
    return {block, d.head_dim};
  }
}

// Where head (b, h) of an output is computed: in place for f32 storage, else in `block`, which
// store_head then rounds into the tensor.
template <typename T>
Matrix output_head(const RowsView<T>& rows, const AttentionDims& d, int64_t b, int64_t h,
                   float* block) {
  if constexpr (std::is_same_v<T, float>) {
    return {rows.head(d, b, h), rows.ld};
  } else {
    return {block, d.head_dim};
  }
}
template <typename T>
void store_head(const RowsView<T>& rows, const AttentionDims& d, int64_t b, int64_t h,
                const Matrix& computed) {
  if constexpr (!std::is_same_v<T, float>)
    narrow(computed.data, rows.head(d, b, h), rows.ld, d.seq, d.head_dim);
}

// P = softmax(scale Q K^T) of one query head into `p` [T, T], causal: forward and backward both
// call this, so backward sees exactly the probabilities forward used.
void causal_probs(const Matrix& q, const Matrix& k, const AttentionDims& d, float scale, float* p) {
  // The full T x T product costs twice the causal half but keeps it one GEMM.
  sgemm(false, true, d.seq, d.seq, d.head_dim, scale, q.data, q.ld, k.data, k.ld, 0.0f, p, d.seq);
  causal_softmax_rows(p, d.seq);
}

// Runs item(b, h) for every batch b and h < per_batch across the threads (the GEMMs inside an item
// then run on its thread alone).
template <typename Item>
void for_each_head(const AttentionDims& d, int64_t per_batch, Item&& item) {
  const auto run = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) item(i / per_batch, i % per_batch);
  };
  parallel_for(d.batch * per_batch, 1, run);
}

float score_scale(const AttentionDims& d) {
  return 1.0f / std::sqrt(static_cast<float>(d.head_dim));
}

// Each (batch, query head) on its own: out_h = softmax(scale Q_h K_g^T) V_g, g = h / group.
template <typename T>
void forward_as(const AttentionDims& d, const RowsView<T>& out, const RowsView<T>& q,
                const RowsView<T>& k, const RowsView<T>& v) {
  const float scale = score_scale(d);
  const int64_t block = d.head_block();
  constexpr bool kF32 = std::is_same_v<T, float>;
  for_each_head(d, d.heads, [&](int64_t b, int64_t h) {
    const int64_t g = h / d.group();
    float* p = thread_scratch<float>(static_cast<size_t>(d.square()), 1);
    // bf16: q, k, v widened into scratch, the output computed in scratch after them.
    float* scratch = kF32 ? nullptr : thread_scratch<float>(static_cast<size_t>(4 * block));
    const Matrix q_h = read_head(q, d, b, h, scratch);
    const Matrix k_g = read_head(k, d, b, g, scratch + block);
    const Matrix v_g = read_head(v, d, b, g, scratch + 2 * block);
    const Matrix y = output_head(out, d, b, h, scratch + 3 * block);
    causal_probs(q_h, k_g, d, scale, p);
    sgemm(false, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, v_g.data, v_g.ld, 0.0f, y.data,
          y.ld);
    store_head(out, d, b, h, y);
  });
}

// Each (batch, key/value head) g on its own, looping over the query heads of its group: dK_g and
// dV_g sum over them (beta = 1 after the first), with no two threads writing one head.
template <typename T>
void backward_as(const AttentionDims& d, const RowsView<T>& d_q, const RowsView<T>& d_k,
                 const RowsView<T>& d_v, const RowsView<T>& d_out, const RowsView<T>& q,
                 const RowsView<T>& k, const RowsView<T>& v) {
  const float scale = score_scale(d);
  const int64_t block = d.head_block();
  constexpr bool kF32 = std::is_same_v<T, float>;
  for_each_head(d, d.kv_heads, [&](int64_t b, int64_t g) {
    // P and dS: two T x T buffers of the thread, reused across heads and calls.
    float* p = thread_scratch<float>(static_cast<size_t>(2 * d.square()), 1);
    float* ds = p + d.square();
    // bf16: k, v, their gradients, then q, its gradient and d_out, in scratch.
    float* scratch = kF32 ? nullptr : thread_scratch<float>(static_cast<size_t>(7 * block));
    const Matrix k_g = read_head(k, d, b, g, scratch);
    const Matrix v_g = read_head(v, d, b, g, scratch + block);
    const Matrix dk_g = output_head(d_k, d, b, g, scratch + 2 * block);
    const Matrix dv_g = output_head(d_v, d, b, g, scratch + 3 * block);
    for (int64_t j = 0; j < d.group(); ++j) {
      const int64_t h = g * d.group() + j;
      const float beta = j == 0 ? 0.0f : 1.0f;
      const Matrix q_h = read_head(q, d, b, h, scratch + 4 * block);
      const Matrix dq_h = output_head(d_q, d, b, h, scratch + 5 * block);
      const Matrix dy = read_head(d_out, d, b, h, scratch + 6 * block);
      causal_probs(q_h, k_g, d, scale, p);
      // out = P V: dV += P^T dOut, dP = dOut V^T.
      sgemm(true, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, dy.data, dy.ld, beta, dv_g.data,
            dv_g.ld);
      sgemm(false, true, d.seq, d.seq, d.head_dim, 1.0f, dy.data, dy.ld, v_g.data, v_g.ld, 0.0f, ds,
            d.seq);
      softmax_backward_rows(p, ds, d.seq);
      // S = scale Q K^T: dQ = scale dS K, dK += scale dS^T Q.
      sgemm(false, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, k_g.data, k_g.ld, 0.0f,
            dq_h.data, dq_h.ld);
      sgemm(true, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, q_h.data, q_h.ld, beta,
            dk_g.data, dk_g.ld);
      store_head(d_q, d, b, h, dq_h);
    }
    store_head(d_k, d, b, g, dk_g);
    store_head(d_v, d, b, g, dv_g);
  });
}

// The packed layout: q, k, v side by side in each row of qkv [B, T, 3C], one key/value head per
// query head.
AttentionDims packed_dims(const Tensor& qkv, int num_heads) {
  const int64_t channels = qkv.dim(2) / 3;
  return {qkv.dim(0), qkv.dim(1), num_heads, num_heads, channels / num_heads};
}
template <typename T>
RowsView<T> packed_part(const Tensor& qkv, int part) {
  const int64_t channels = qkv.dim(2) / 3;
  return {qkv.data<T>() + part * channels, 3 * channels};
}

AttentionDims grouped_dims(const Tensor& q, int num_heads, int num_kv_heads) {
  return {q.dim(0), q.dim(1), num_heads, num_kv_heads, q.dim(2) / num_heads};
}
template <typename T>
RowsView<T> rows_of(const Tensor& t) {
  return {t.data<T>(), t.dim(2)};
}

template <typename T>
void attention_forward_as(const Tensor& out, const Tensor& qkv, int num_heads) {
  forward_as<T>(packed_dims(qkv, num_heads), rows_of<T>(out), packed_part<T>(qkv, 0),
                packed_part<T>(qkv, 1), packed_part<T>(qkv, 2));
}

template <typename T>
void attention_backward_as(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                           int num_heads) {
  backward_as<T>(packed_dims(qkv, num_heads), packed_part<T>(d_qkv, 0), packed_part<T>(d_qkv, 1),
                 packed_part<T>(d_qkv, 2), rows_of<T>(d_out), packed_part<T>(qkv, 0),
                 packed_part<T>(qkv, 1), packed_part<T>(qkv, 2));
}

template <typename T>
void grouped_forward_as(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                        int num_heads, int num_kv_heads) {
  forward_as<T>(grouped_dims(q, num_heads, num_kv_heads), rows_of<T>(out), rows_of<T>(q),
                rows_of<T>(k), rows_of<T>(v));
}

template <typename T>
void grouped_backward_as(const Tensor& d_q, const Tensor& d_k, const Tensor& d_v,
                         const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                         int num_heads, int num_kv_heads) {
  backward_as<T>(grouped_dims(q, num_heads, num_kv_heads), rows_of<T>(d_q), rows_of<T>(d_k),
                 rows_of<T>(d_v), rows_of<T>(d_out), rows_of<T>(q), rows_of<T>(k), rows_of<T>(v));
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& qkv, int num_heads) {
  if (qkv.dtype() == DType::bf16) return attention_forward_as<BF16>(out, qkv, num_heads);
  attention_forward_as<float>(out, qkv, num_heads);
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        int num_heads) {
  if (qkv.dtype() == DType::bf16) return attention_backward_as<BF16>(d_qkv, d_out, qkv, num_heads);
  attention_backward_as<float>(d_qkv, d_out, qkv, num_heads);
}

void grouped_attention_forward(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                               int num_heads, int num_kv_heads) {
  if (q.dtype() == DType::bf16)
    return grouped_forward_as<BF16>(out, q, k, v, num_heads, num_kv_heads);
  grouped_forward_as<float>(out, q, k, v, num_heads, num_kv_heads);
}

void grouped_attention_backward(const Tensor& d_q, const Tensor& d_k, const Tensor& d_v,
                                const Tensor& d_out, const Tensor& q, const Tensor& k,
                                const Tensor& v, int num_heads, int num_kv_heads) {
  if (q.dtype() == DType::bf16)
    return grouped_backward_as<BF16>(d_q, d_k, d_v, d_out, q, k, v, num_heads, num_kv_heads);
  grouped_backward_as<float>(d_q, d_k, d_v, d_out, q, k, v, num_heads, num_kv_heads);
}

}  // namespace meshtrain::ops::cpu

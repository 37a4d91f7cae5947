// Causal multi-head self-attention. Per (batch, head) the score and value products are GEMMs over
// strided views of qkv [B, T, 3C], into a T x T scratch buffer of the thread; backward recomputes
// the scores and the softmax the same way (the same bits), so no probabilities are kept between
// the passes. The (batch, head) pairs are split across the calling thread's CPU threads; the
// softmax rows are vectorised (simd.h, fast_exp.h). bf16 qkv / out are widened per pair into f32
// scratch for the f32 GEMMs and rounded back.
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
// Shapes and strides shared by forward and backward.
struct AttentionDims {
  int64_t batch, seq, channels, heads, head_dim;
  AttentionDims(const Tensor& qkv, int num_heads)
      : batch(qkv.dim(0)),
        seq(qkv.dim(1)),
        channels(qkv.dim(2) / 3),
        heads(num_heads),
        head_dim(channels / num_heads) {}
  int64_t pairs() const { return batch * heads; }
  int64_t qkv_offset(int64_t b, int64_t h) const { return b * seq * 3 * channels + h * head_dim; }
  int64_t out_offset(int64_t b, int64_t h) const { return b * seq * channels + h * head_dim; }
  int64_t square() const { return seq * seq; }
};

// Row t's keys 0..t rounded up to whole lanes (at most seq): the row loops below run over these,
// with -inf scores (e^-inf = 0) or zero probabilities in the padding, so that they need no scalar
// tails.
int64_t padded_keys(int64_t t, int64_t seq) {
  const int64_t lanes = LaneSum<>::kLanes;
  return std::min(seq, (t + lanes) / lanes * lanes);
}

// In place over the T x T scores of one pair: row t becomes the softmax over keys 0..t, with zeros
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

// In place over dP of one pair: dS = P * (dP - sum_j P dP) per row; masked entries (P = 0) are 0.
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

// One head's q, k, v (or their gradients) as f32 matrices with a row stride: views into qkv for
// f32 storage, packed scratch for bf16.
struct HeadViews {
  float* q;
  float* k;
  float* v;
  int64_t ld;
};

// The views of the head whose q (or dq) starts at `pair`: in place for f32; for bf16, `scratch`
// [3, T, head_dim], filled from `pair` when `read` (an input, not a gradient still to compute).
template <typename T>
HeadViews head_views(T* pair, const AttentionDims& d, float* scratch, bool read) {
  if constexpr (std::is_same_v<T, float>) {
    return {pair, pair + d.channels, pair + 2 * d.channels, 3 * d.channels};
  } else {
    const int64_t block = d.seq * d.head_dim;
    if (read)
      for (int part = 0; part < 3; ++part)
        widen(pair + part * d.channels, 3 * d.channels, scratch + part * block, d.seq, d.head_dim);
    return {scratch, scratch + block, scratch + 2 * block, d.head_dim};
  }
}

// P = softmax(scale Q K^T) of one head into `p` [T, T], causal: forward and backward both call
// this, so backward sees exactly the probabilities forward used.
void causal_probs(const HeadViews& head, const AttentionDims& d, float scale, float* p) {
  // The full T x T product costs twice the causal half but keeps it one GEMM.
  sgemm(false, true, d.seq, d.seq, d.head_dim, scale, head.q, head.ld, head.k, head.ld, 0.0f, p,
        d.seq);
  causal_softmax_rows(p, d.seq);
}

// Runs pair(b, h) for every (batch, head) pair across the threads (the GEMMs inside a pair then
// run on its thread alone).
template <typename Pair>
void for_each_pair(const AttentionDims& d, Pair&& pair) {
  const auto run = [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) pair(i / d.heads, i % d.heads);
  };
  parallel_for(d.pairs(), 1, run);
}

template <typename T>
void forward_as(const Tensor& out, const Tensor& qkv, int num_heads) {
  const AttentionDims d(qkv, num_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  const int64_t head_block = d.seq * d.head_dim;
  constexpr bool kF32 = std::is_same_v<T, float>;
  for_each_pair(d, [&](int64_t b, int64_t h) {
    T* qkv_pair = qkv.data<T>() + d.qkv_offset(b, h);
    T* out_pair = out.data<T>() + d.out_offset(b, h);
    float* p = thread_scratch<float>(static_cast<size_t>(d.square()), 1);
    // bf16: q, k, v widened into scratch, the output computed in scratch after them.
    float* scratch = kF32 ? nullptr : thread_scratch<float>(static_cast<size_t>(4 * head_block));
    const HeadViews head = head_views(qkv_pair, d, scratch, true);
    float* y;
    int64_t ld_y;
    if constexpr (kF32) {
      y = out_pair;
      ld_y = d.channels;
    } else {
      y = scratch + 3 * head_block;
      ld_y = d.head_dim;
    }
    causal_probs(head, d, scale, p);
    sgemm(false, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, head.v, head.ld, 0.0f, y, ld_y);
    if constexpr (!kF32) narrow(y, out_pair, d.channels, d.seq, d.head_dim);
  });
}

template <typename T>
void backward_as(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv, int num_heads) {
  const AttentionDims d(qkv, num_heads);
  const int64_t ld_qkv = 3 * d.channels;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  const int64_t head_block = d.seq * d.head_dim;
  constexpr bool kF32 = std::is_same_v<T, float>;
  for_each_pair(d, [&](int64_t b, int64_t h) {
    T* qkv_pair = qkv.data<T>() + d.qkv_offset(b, h);
    T* d_qkv_pair = d_qkv.data<T>() + d.qkv_offset(b, h);
    T* dy_pair = d_out.data<T>() + d.out_offset(b, h);
    // P and dS: two T x T buffers of the thread, reused across pairs and calls.
    float* p = thread_scratch<float>(static_cast<size_t>(2 * d.square()), 1);
    float* ds = p + d.square();
    // bf16: q, k, v, then their gradients, then d_out, in scratch.
    float* scratch = kF32 ? nullptr : thread_scratch<float>(static_cast<size_t>(7 * head_block));
    const HeadViews head = head_views(qkv_pair, d, scratch, true);
    causal_probs(head, d, scale, p);
    const HeadViews grad =
        head_views(d_qkv_pair, d, kF32 ? nullptr : scratch + 3 * head_block, false);
    const float* dy;
    int64_t ld_dy;
    if constexpr (kF32) {
      dy = dy_pair;
      ld_dy = d.channels;
    } else {
      widen(dy_pair, d.channels, scratch + 6 * head_block, d.seq, d.head_dim);
      dy = scratch + 6 * head_block;
      ld_dy = d.head_dim;
    }
    // out = P V: dV = P^T dOut, dP = dOut V^T.
    sgemm(true, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, dy, ld_dy, 0.0f, grad.v, grad.ld);
    sgemm(false, true, d.seq, d.seq, d.head_dim, 1.0f, dy, ld_dy, head.v, head.ld, 0.0f, ds, d.seq);
    softmax_backward_rows(p, ds, d.seq);
    // S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
    sgemm(false, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, head.k, head.ld, 0.0f, grad.q,
          grad.ld);
    sgemm(true, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, head.q, head.ld, 0.0f, grad.k,
          grad.ld);
    if constexpr (!kF32)
      for (int part = 0; part < 3; ++part)
        narrow(grad.q + part * head_block, d_qkv_pair + part * d.channels, ld_qkv, d.seq,
               d.head_dim);
  });
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& qkv, int num_heads) {
  if (qkv.dtype() == DType::bf16) return forward_as<BF16>(out, qkv, num_heads);
  forward_as<float>(out, qkv, num_heads);
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        int num_heads) {
  if (qkv.dtype() == DType::bf16) return backward_as<BF16>(d_qkv, d_out, qkv, num_heads);
  backward_as<float>(d_qkv, d_out, qkv, num_heads);
}

}  // namespace meshtrain::ops::cpu

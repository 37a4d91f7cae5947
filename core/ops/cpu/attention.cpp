// Causal multi-head self-attention. Per (batch, head) the score and value products are GEMMs over
// strided views of qkv [B, T, 3C]; the softmax is saved in probs [B, H, T, T] for backward.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/ops/cpu/blas.h"
#include "core/ops/cpu/cpu_ops.h"

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
  int64_t qkv_offset(int64_t b, int64_t h) const { return b * seq * 3 * channels + h * head_dim; }
  int64_t out_offset(int64_t b, int64_t h) const { return b * seq * channels + h * head_dim; }
  int64_t probs_offset(int64_t b, int64_t h) const { return (b * heads + h) * seq * seq; }
};

// In place over row t of the scores: softmax over keys 0..t, zero for the future keys.
void causal_softmax_row(float* row, int64_t t, int64_t seq) {
  const float max = *std::max_element(row, row + t + 1);
  float sum = 0.0f;
  for (int64_t j = 0; j <= t; ++j) {
    row[j] = std::exp(row[j] - max);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j <= t; ++j) row[j] *= inv;
  std::fill(row + t + 1, row + seq, 0.0f);
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int num_heads) {
  const AttentionDims d(qkv, num_heads);
  const int64_t ld_qkv = 3 * d.channels;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* q = qkv.data<float>() + d.qkv_offset(b, h);
      const float* k = q + d.channels;
      const float* v = q + 2 * d.channels;
      float* p = probs.data<float>() + d.probs_offset(b, h);
      // The full T x T product costs twice the causal half but keeps it one GEMM.
      sgemm(false, true, d.seq, d.seq, d.head_dim, scale, q, ld_qkv, k, ld_qkv, 0.0f, p, d.seq);
      for (int64_t t = 0; t < d.seq; ++t) causal_softmax_row(p + t * d.seq, t, d.seq);
      sgemm(false, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, v, ld_qkv, 0.0f,
            out.data<float>() + d.out_offset(b, h), d.channels);
    }
  }
}

void attention_backward(const Tensor& d_qkv, const Tensor& d_out, const Tensor& qkv,
                        const Tensor& probs, int num_heads) {
  const AttentionDims d(qkv, num_heads);
  const int64_t ld_qkv = 3 * d.channels;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  std::vector<float> d_scores(static_cast<size_t>(d.seq * d.seq));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* q = qkv.data<float>() + d.qkv_offset(b, h);
      const float* k = q + d.channels;
      const float* v = q + 2 * d.channels;
      float* dq = d_qkv.data<float>() + d.qkv_offset(b, h);
      float* dk = dq + d.channels;
      float* dv = dq + 2 * d.channels;
      const float* p = probs.data<float>() + d.probs_offset(b, h);
      const float* dy = d_out.data<float>() + d.out_offset(b, h);
      float* ds = d_scores.data();
      // out = P V: dV = P^T dOut, dP = dOut V^T.
      sgemm(true, false, d.seq, d.head_dim, d.seq, 1.0f, p, d.seq, dy, d.channels, 0.0f, dv,
            ld_qkv);
      sgemm(false, true, d.seq, d.seq, d.head_dim, 1.0f, dy, d.channels, v, ld_qkv, 0.0f, ds,
            d.seq);
      // Softmax backward per row: dS = P * (dP - sum_j P dP); masked entries have P = 0.
      for (int64_t t = 0; t < d.seq; ++t) {
        const float* p_row = p + t * d.seq;
        float* ds_row = ds + t * d.seq;
        float dot = 0.0f;
        for (int64_t j = 0; j <= t; ++j) dot += p_row[j] * ds_row[j];
        for (int64_t j = 0; j < d.seq; ++j) ds_row[j] = p_row[j] * (ds_row[j] - dot);
      }
      // S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q.
      sgemm(false, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, k, ld_qkv, 0.0f, dq, ld_qkv);
      sgemm(true, false, d.seq, d.head_dim, d.seq, scale, ds, d.seq, q, ld_qkv, 0.0f, dk, ld_qkv);
    }
  }
}

}  // namespace meshtrain::ops::cpu

#include "meshtrain/parallel/nn/grouped_attention.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

GroupedAttention::GroupedAttention(int heads, int kv_heads, float rope_theta)
    : heads_(heads),
      kv_heads_(kv_heads),
      rope_theta_(rope_theta),
      local_heads_(heads),
      local_kv_heads_(kv_heads) {
  MT_CHECK(kv_heads > 0 && heads > 0 && heads % kv_heads == 0,
           "grouped-query attention needs key/value heads dividing the query heads, got ", heads,
           " query heads and ", kv_heads, " key/value heads");
  MT_CHECK(rope_theta > 0.0f, "rotary embeddings need rope_theta > 0, got ", rope_theta);
}

void GroupedAttention::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::heads) Module::check_parallel(style, tp);
  if (heads_ % tp != 0)
    throw InvalidArgument(detail::concat("tensor parallelism splits attention heads over tp: ",
                                         heads_, " query heads do not divide by tp=", tp));
  if (kv_heads_ % tp != 0)
    throw InvalidArgument(
        detail::concat("tensor parallelism splits the key/value heads over tp: ", kv_heads_,
                       " key/value heads do not divide by tp=", tp, "; choose a tp that divides ",
                       kv_heads_, " (key/value heads are not replicated across tp ranks)"));
}

void GroupedAttention::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  local_heads_ = heads_ / setup.tp.size();
  local_kv_heads_ = kv_heads_ / setup.tp.size();
}

Tensor GroupedAttention::forward(const QueryKeyValue& qkv, int64_t batch, int64_t seq, Tape& tape) {
  const int64_t rows = batch * seq;
  MT_CHECK(qkv.q.ndim() == 2 && qkv.q.dim(0) == rows && qkv.q.dim(1) % local_heads_ == 0,
           "attention: q must be [", rows, ", heads * head_dim] with ", local_heads_,
           " heads, got ", qkv.q.describe());
  const int64_t head_dim = qkv.q.dim(1) / local_heads_;
  const Shape kv_shape{rows, local_kv_heads_ * head_dim};
  MT_CHECK(qkv.k.shape() == kv_shape && qkv.v.shape() == kv_shape, "attention: k and v must be [",
           rows, ", ", kv_shape[1], "] (", local_kv_heads_, " key/value heads of ", head_dim,
           "), got ", qkv.k.describe(), " and ", qkv.v.describe());
  const Tensor q = qkv.q.reshape({batch, seq, qkv.q.dim(1)});
  const Tensor k = qkv.k.reshape({batch, seq, kv_shape[1]});
  const Tensor v = qkv.v.reshape({batch, seq, kv_shape[1]});
  ops::rotary_forward(q, head_dim, rope_theta_, 0);
  ops::rotary_forward(k, head_dim, rope_theta_, 0);
  Tensor out = activation_like(q, q.shape());
  ops::grouped_attention_forward(out, q, k, v, local_heads_, local_kv_heads_);
  // All backward needs: it recomputes the softmax.
  tape.push(q);
  tape.push(k);
  tape.push(v);
  return out.reshape({rows, q.dim(2)});
}

QueryKeyValue GroupedAttention::backward(const Tensor& d_out, Tape& tape) {
  const Tensor v = tape.pop(), k = tape.pop(), q = tape.pop();
  const int64_t head_dim = q.dim(2) / local_heads_;
  Tensor d_q = activation_like(q, q.shape());
  Tensor d_k = activation_like(k, k.shape()), d_v = activation_like(v, v.shape());
  ops::grouped_attention_backward(d_q, d_k, d_v, d_out.reshape(q.shape()), q, k, v, local_heads_,
                                  local_kv_heads_);
  // The rotation is orthogonal: its gradient turns back by the same angle.
  ops::rotary_backward(d_q, head_dim, rope_theta_, 0);
  ops::rotary_backward(d_k, head_dim, rope_theta_, 0);
  const int64_t rows = q.dim(0) * q.dim(1);
  return {d_q.reshape({rows, q.dim(2)}), d_k.reshape({rows, k.dim(2)}),
          d_v.reshape({rows, v.dim(2)})};
}

}  // namespace meshtrain::nn

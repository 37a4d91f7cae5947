#include "meshtrain/parallel/nn/attention.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

Attention::Attention(int heads) : heads_(heads), local_heads_(heads) {
  MT_CHECK(heads > 0, "Attention needs at least one head, got ", heads);
}

void Attention::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::heads) Module::check_parallel(style, tp);
  if (heads_ % tp != 0)
    throw InvalidArgument(detail::concat("tensor parallelism splits attention heads over tp: ",
                                         heads_, " heads do not divide by tp=", tp));
}

void Attention::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  local_heads_ = heads_ / setup.tp.size();
}

Tensor Attention::forward(const Tensor& qkv, int64_t batch, int64_t seq, Tape& tape) {
  MT_CHECK(qkv.ndim() == 2 && qkv.dim(0) == batch * seq && qkv.dim(1) % 3 == 0,
           "attention: qkv must be [", batch * seq, ", 3C], got ", qkv.describe());
  const int64_t c = qkv.dim(1) / 3;
  Tensor out = activation_like(qkv, {batch, seq, c});
  const Tensor qkv3 = qkv.reshape({batch, seq, 3 * c});
  ops::attention_forward(out, qkv3, local_heads_);
  tape.push(qkv3);  // all backward needs: it recomputes the softmax
  return out.reshape({batch * seq, c});
}

Tensor Attention::backward(const Tensor& d_out, Tape& tape) {
  const Tensor qkv = tape.pop();
  Tensor d_qkv = activation_like(qkv, qkv.shape());
  ops::attention_backward(d_qkv, d_out.reshape({qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3}), qkv,
                          local_heads_);
  return d_qkv.reshape({qkv.dim(0) * qkv.dim(1), qkv.dim(2)});
}

}  // namespace meshtrain::nn

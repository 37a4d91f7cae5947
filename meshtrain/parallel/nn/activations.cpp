#include "meshtrain/parallel/nn/activations.h"

#include "meshtrain/core/error.h"

namespace meshtrain::nn {

Tensor grad_target(const Parameter& param) {
  if (param.requires_grad()) return param.grad();
  const Tensor& value = param.value();
  return Tensor::zeros(value.shape(), value.dtype(), value.device());
}

Tensor grad_or_none(const Parameter* param) {
  return param && param->requires_grad() ? param->grad() : Tensor();
}

Tensor activation_like(const Tensor& like, const Shape& shape) {
  return Tensor::empty(shape, like.dtype(), like.device());
}

Tensor f32_like(const Tensor& like, const Shape& shape) {
  return Tensor::empty(shape, DType::f32, like.device());
}

Tensor on_device_of(const Tensor& like, const Tensor& tokens) { return tokens.on(like.device()); }

void check_token_ids(const Tensor& ids, int64_t vocab, const char* what) {
  if (!ids.device().is_cpu()) return;
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    MT_CHECK(id[i] >= 0 && id[i] < vocab, what, " ", id[i], " at position ", i,
             " is outside the vocabulary [0, ", vocab, ")");
}

}  // namespace meshtrain::nn

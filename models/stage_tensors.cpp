#include "models/stage_tensors.h"

namespace meshtrain {

Tensor grad_target(const Parameter& param) {
  if (param.requires_grad()) return param.grad();
  const Tensor& value = param.value();
  return Tensor::zeros(value.shape(), value.dtype(), value.device());
}

Tensor activation_like(const Tensor& like, const Shape& shape) {
  return Tensor::empty(shape, like.dtype(), like.device());
}

Tensor f32_like(const Tensor& like, const Shape& shape) {
  return Tensor::empty(shape, DType::f32, like.device());
}

Tensor on_device_of(const Tensor& like, const Tensor& tokens) {
  return tokens.device() == like.device() ? tokens : tokens.to(like.device());
}

}  // namespace meshtrain

// Parameter: a named model weight with its gradient. Compute reads the full value through value();
// a strategy that shards the parameter (FSDP) marks it unavailable between uses, and a read then
// raises an error naming the parameter and why, never returns garbage.
#pragma once

#include <string>

#include "core/tensor.h"

namespace meshtrain {

class Parameter {
 public:
  Parameter(std::string name, Shape shape, DType dtype = DType::f32);

  const std::string& name() const { return name_; }
  // The full shape that compute sees (after tensor parallelism: this rank's TP piece).
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool value) { requires_grad_ = value; }
  // Weight decay applies to matrices and embeddings, not to biases and LayerNorm gains.
  bool decays() const { return shape_.size() >= 2; }

  // The full value and gradient, as compute uses them. Both throw while unavailable.
  const Tensor& value() const;
  const Tensor& grad() const;
  bool available() const { return unavailable_reason_.empty(); }

  // Strategy side: install the tensors compute should use, or withdraw them with a reason.
  void set_value(Tensor value);
  void set_grad(Tensor grad);
  void make_unavailable(std::string reason);  // drops the handles, keeps the reason for errors
  void make_available() { unavailable_reason_.clear(); }

 private:
  std::string name_;
  Shape shape_;
  DType dtype_;
  bool requires_grad_ = true;
  Tensor value_;
  Tensor grad_;
  std::string unavailable_reason_;
};

}  // namespace meshtrain

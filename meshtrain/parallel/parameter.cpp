#include "meshtrain/parallel/parameter.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

Parameter::Parameter(std::string name, Shape global_shape, DType dtype, Device device)
    : name_(std::move(name)), global_shape_(global_shape), shape_(std::move(global_shape)),
      dtype_(dtype), device_(device) {}

const Tensor& Parameter::value() const {
  if (!available())
    throw Error(detail::concat("parameter '", name_, "' read while ", unavailable_reason_));
  MT_CHECK(value_.defined(), "parameter '", name_, "' has no value yet");
  return value_;
}

const Tensor& Parameter::grad() const {
  if (!available())
    throw Error(detail::concat("gradient of parameter '", name_, "' read while ",
                               unavailable_reason_));
  MT_CHECK(grad_.defined(), "parameter '", name_, "' has no gradient buffer",
           requires_grad_ ? "" : " (it is frozen)");
  return grad_;
}

void Parameter::set_value(Tensor value) {
  MT_CHECK(value.shape() == shape_, "parameter '", name_, "' expects shape ",
           shape_string(shape_), ", got ", value.describe());
  value_ = std::move(value);
}

void Parameter::set_grad(Tensor grad) {
  MT_CHECK(grad.shape() == shape_, "gradient of parameter '", name_, "' expects shape ",
           shape_string(shape_), ", got ", grad.describe());
  grad_ = std::move(grad);
}

void Parameter::make_unavailable(std::string reason) {
  MT_CHECK(!reason.empty(), "make_unavailable needs a reason");
  unavailable_reason_ = std::move(reason);
  value_ = Tensor();
  grad_ = Tensor();
}

void Parameter::release_tensors() {
  value_ = Tensor();
  grad_ = Tensor();
}

void Parameter::set_layout(Layout layout, Shape local_shape) {
  MT_CHECK(local_shape.size() == global_shape_.size(), "parameter '", name_,
           "': a local piece keeps the global rank ", shape_string(global_shape_),
           ", got local shape ", shape_string(local_shape));
  layout_ = std::move(layout);
  shape_ = std::move(local_shape);
  release_tensors();
}

}  // namespace meshtrain

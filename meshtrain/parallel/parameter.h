// Parameter: a named model weight with its gradient. Compute reads its value through value();
// a strategy that shards the parameter (FSDP) marks it unavailable between uses, and a read then
// raises an error naming the parameter and why, never returns garbage.
//
// Every parameter knows its global shape and its Layout over the mesh: which mesh axes shard which
// dim. Tensor parallelism narrows the value compute sees to this rank's TP piece (shape()); FSDP
// then shards that piece on dim 0 over the data axes and says so in its optimizer slots' layouts.
// Export, gradient norms and checkpoints derive "which global slice do I hold" from the layout.
#pragma once

#include <string>

#include "meshtrain/core/tensor.h"
#include "meshtrain/mesh/layout.h"

namespace meshtrain {

class Parameter {
 public:
  // `device`: where its tensors live once placed (a model may create parameters without tensors
  // and let a plan fill only each rank's piece; see meshtrain/parallel/parameter_source.h).
  Parameter(std::string name, Shape global_shape, DType dtype = DType::f32,
            Device device = Device::cpu());

  const std::string& name() const { return name_; }
  // The shape of the global (unsharded, Hugging Face) tensor.
  const Shape& global_shape() const { return global_shape_; }
  // The shape compute sees: this rank's tensor-parallel piece (the global shape without TP).
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  // How the compute piece is laid out over the mesh (replicated unless TP sharded it).
  const Layout& layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }
  void set_requires_grad(bool value) { requires_grad_ = value; }
  // A copy of a parameter tied across pipeline stages (GPT-2's wte on the last stage): it trains
  // like its twin, whose gradient it shares, and is left out where each value counts once.
  bool tied_copy() const { return tied_copy_; }
  void set_tied_copy(bool value) { tied_copy_ = value; }
  // Weight decay applies to matrices and embeddings, not to biases and LayerNorm gains.
  bool decays() const { return global_shape_.size() >= 2; }

  // The compute value and gradient. Both throw while unavailable.
  const Tensor& value() const;
  const Tensor& grad() const;
  bool available() const { return unavailable_reason_.empty(); }

  // Strategy side: install the tensors compute should use, or withdraw them with a reason.
  void set_value(Tensor value);
  void set_grad(Tensor grad);
  void make_unavailable(std::string reason);  // drops the handles, keeps the reason for errors
  void make_available() { unavailable_reason_.clear(); }
  // Drops the value and gradient handles (the tensors go when their last handle does).
  void release_tensors();
  // Narrows the compute piece to `local_shape` under `layout`; the caller installs the new value
  // and gradient.
  void set_layout(Layout layout, Shape local_shape);

 private:
  std::string name_;
  Shape global_shape_;
  Shape shape_;
  Layout layout_;
  DType dtype_;
  Device device_;
  bool requires_grad_ = true;
  bool tied_copy_ = false;
  Tensor value_;
  Tensor grad_;
  std::string unavailable_reason_;
};

}  // namespace meshtrain

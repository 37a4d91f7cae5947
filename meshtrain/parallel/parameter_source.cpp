#include "meshtrain/parallel/parameter_source.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/layout_copy.h"

namespace meshtrain {

void fill_local(const ParameterSource& source, const Parameter& p, const Layout& layout,
                const MeshLayout& mesh, int rank, const Tensor& out) {
  MT_CHECK(out.dtype() == DType::f32, "parameter '", p.name(), "' is filled as f32, got ",
           out.describe());
  const Shape shape = layout.local_shape(p.global_shape(), mesh, rank);
  MT_CHECK(out.shape() == shape, "parameter '", p.name(), "': the local tensor under ",
           layout.to_string(), " is ", shape_string(shape), ", got ", out.describe());
  if (out.device().is_meta()) return;  // shape-only: no values to fill
  const std::vector<LocalPiece> pieces = layout.local_pieces(p.global_shape(), mesh, rank);
  if (out.device().is_cpu()) {
    source.read(p, pieces, out);
    return;
  }
  MemoryCategoryScope scope(MemoryCategory::other);  // staging on the host
  const Tensor host = Tensor::empty(shape, DType::f32);
  source.read(p, pieces, host);
  out.copy_from(host);
}

void materialize(Model& model, const ParameterSource& source, Device device) {
  for (Parameter* p : model.parameters()) {
    {
      MemoryCategoryScope scope(MemoryCategory::param);
      p->set_value(Tensor::empty(p->global_shape(), DType::f32, device));
    }
    fill_local(source, *p, Layout(), MeshLayout(), 0, p->value());
    if (!p->requires_grad()) continue;
    MemoryCategoryScope scope(MemoryCategory::grad);
    p->set_grad(Tensor::zeros(p->global_shape(), DType::f32, device));
  }
}

MaterializedValues::MaterializedValues(Model& model) {
  for (Parameter* p : model.parameters()) {
    const Tensor& value = p->value();
    MT_CHECK(p->shape() == p->global_shape() && value.dtype() == DType::f32, "parameter '",
             p->name(), "' must hold its full fp32 value to be placed, got ", value.describe());
    full_[p] = value.on(Device::cpu());
    p->release_tensors();
  }
}

void MaterializedValues::read(const Parameter& p, const std::vector<LocalPiece>& pieces,
                              const Tensor& local) const {
  const auto it = full_.find(&p);
  MT_CHECK(it != full_.end(), "parameter '", p.name(), "' is not one of the model's");
  copy_global_to_local(local, it->second, pieces);
}

}  // namespace meshtrain

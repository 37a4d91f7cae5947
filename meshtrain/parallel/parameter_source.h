// ParameterSource: where parameter values come from when a plan places a model on its ranks.
//
// A source fills any rank's local piece of a parameter from global coordinates, so no rank ever
// needs the full model: random initialisation generates only the local slice (its RNG is
// counter-based), a safetensors file or a distributed checkpoint reads only the local slice's
// bytes. The strategies only narrow layouts (pipeline: which parameters, TP: which piece, FSDP:
// which rows); whoever ends up holding a parameter's local tensor fills it from the source once.
#pragma once

#include <map>
#include <vector>

#include "meshtrain/mesh/layout.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

class ParameterSource {
 public:
  virtual ~ParameterSource() = default;
  // Fills `local` (f32 on the host, shaped as the local tensor) with p's global values under
  // `pieces` (Layout::local_pieces).
  virtual void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
                    const Tensor& local) const = 0;
};

// Fills `out` (f32, any device) with `rank`'s local tensor of p under `layout`; a shape-only
// `out` (Device::meta) is only checked.
void fill_local(const ParameterSource& source, const Parameter& p, const Layout& layout,
                const MeshLayout& mesh, int rank, const Tensor& out);

// Gives every parameter of `model` (built without tensors) its whole value from `source` and, if
// trainable, a zeroed gradient, on `device`: the single-rank model, the reference every layout is
// checked against.
void materialize(Model& model, const ParameterSource& source, Device device);

// The values a materialized model holds now. Taking them releases the parameters' tensors
// (values and gradients), so that a plan can place the model as it places an unmaterialized one;
// the full tensors live as long as this source.
class MaterializedValues : public ParameterSource {
 public:
  explicit MaterializedValues(Model& model);
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override;

 private:
  std::map<const Parameter*, Tensor> full_;
};

}  // namespace meshtrain

#include "meshtrain/plan/rank_model.h"

#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

RankModel::RankModel(const ModelSpec& spec, const PlanLayout& layout, int pp_rank, int tp_rank)
    : unit_policy_(layout.fsdp.unit_policy), full_(spec.build(Device::cpu())), stages_{0} {
  const MeshLayout& mesh = layout.mesh;
  // The mesh rank whose pp and tp coordinates these are (the others do not change the pieces).
  std::vector<int> coordinates(static_cast<size_t>(mesh.ndim()), 0);
  if (layout.pipelined()) coordinates[mesh.axis_index(mesh_axis::pp)] = pp_rank;
  if (layout.tensor_parallel()) coordinates[mesh.axis_index(mesh_axis::tp)] = tp_rank;
  const int rank = mesh.rank_of(coordinates);

  if (layout.pipelined()) {
    const int ranks = mesh.axis_size(mesh_axis::pp);
    const int stages = ranks * layout.pp.virtual_stages;
    const std::vector<LayerSpan> spans = partition_layers(static_cast<int>(full_->layers().size()),
                                                          stages, layout.pp.layers_per_stage);
    std::vector<LayerSpan> mine;
    stages_.clear();
    for (int s = pp_rank; s < stages; s += ranks) {
      stages_.push_back(s);
      mine.push_back(spans[s]);
    }
    stage_ = std::make_unique<StageModel>(*full_, mine);
  }

  if (layout.tensor_parallel()) {
    const int tp = mesh.axis_size(mesh_axis::tp);
    tp_group_ = std::make_unique<ShapeCommunicator>(tp, tp_rank, std::string(mesh_axis::tp));
    const nn::TpSetup setup{
        mesh, rank,
        nn::TensorParallel{tp > 1 ? tp_group_.get() : nullptr, layout.tp.sequence_parallel}};
    Model& narrowed = model();
    const std::vector<nn::NamedModule> modules = narrowed.modules();
    for (const nn::TpRule& rule : narrowed.tensor_parallel_plan())
      for (const nn::NamedModule& m : modules)
        if (nn::matches_pattern(rule.pattern, m.name)) m.module->parallelize(rule.style, setup);
  }
}

std::vector<UnitSpec> RankModel::unit_specs() {
  if (unit_policy_) return unit_policy_(model());
  return model().default_units();
}

}  // namespace meshtrain

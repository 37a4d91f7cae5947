#include "meshtrain/plan/model_state.h"

#include <algorithm>
#include <map>
#include <utility>

#include "meshtrain/core/dtype.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/plan/rank_model.h"
#include "meshtrain/plan/unit_buffers.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "meshtrain/plugins/fsdp/shard_layout.h"

namespace meshtrain {

namespace {

const uint64_t kF32 = dtype_size(DType::f32);
const uint64_t kMoments = 2 * kF32;  // AdamW's exp_avg and exp_avg_sq

// Without a data axis (WholeParameters): every parameter of the rank's model whole.
ModelStateBytes whole_parameters(Model& model) {
  ModelStateBytes b;
  for (Parameter* p : model.parameters()) {
    const uint64_t n = static_cast<uint64_t>(p->numel());
    b.parameters += kF32 * n;
    if (!p->requires_grad()) continue;
    b.gradients += kF32 * n;
    b.optimizer += kMoments * n;
  }
  return b;
}

// Under FSDP (FsdpStrategy::apply, FsdpUnit): the state of each rank of the shard group.
std::vector<ModelStateBytes> fsdp_shards(RankModel& rank_model, const PlanLayout& layout) {
  Model& model = rank_model.model();
  const FsdpOptions& o = layout.fsdp;
  const int world = layout.fsdp_shard_size();
  const UnitPlan plan = make_unit_plan(model, rank_model.unit_specs());
  const bool pipelined = layout.pipelined();
  const bool reshard = o.reshard_after_forward.value_or(
      (o.mode == FsdpMode::full || o.mode == FsdpMode::hybrid) && !pipelined);
  std::vector<ModelStateBytes> shards(static_cast<size_t>(world));
  std::vector<UnitBuffer> buffers;
  for (const Unit& unit : plan.units) {
    const UnitShardLayout shard = make_unit_shard_layout(unit.params, world);
    bool all_f32 = true;
    int64_t full_numel = 0;
    for (const ParamShard& s : shard.params) {
      all_f32 = all_f32 && s.param->dtype() == DType::f32;
      full_numel += s.param->numel();
    }
    for (int r = 0; r < world; ++r) {
      ModelStateBytes& b = shards[r];
      b.parameters += kF32 * static_cast<uint64_t>(shard.shard_numel);
      b.gradients += kF32 * static_cast<uint64_t>(shard.grad_shard_numel);
      for (const ParamShard& s : shard.params)
        if (s.grad_offset >= 0)
          b.optimizer += kMoments * static_cast<uint64_t>(s.rows_of(r, world).size * s.row_numel);
    }
    // A group of one in f32 throughout computes on views of the shards themselves.
    const bool views = world == 1 && all_f32 && o.param_dtype == DType::f32 &&
                       o.reduce_dtype == DType::f32 && !o.offload;
    buffers.push_back(
        {.bytes = views ? 0 : static_cast<int64_t>(dtype_size(o.param_dtype)) * full_numel,
         .reshard_after_forward = reshard && (!unit.root || o.reshard_root_after_forward)});
  }
  const uint64_t peak = static_cast<uint64_t>(unsharded_param_peak(plan, buffers, pipelined));
  for (ModelStateBytes& b : shards) b.unsharded_unit_buffers = peak;
  return shards;
}

// The checks a run makes before building anything, on a model without tensors.
void check_layout(const ModelSpec& spec, const PlanLayout& layout) {
  if (layout.data_parallel()) {
    const FsdpStrategy fsdp(layout.fsdp);  // its options
    layout.fsdp_shard_axis();              // its groups
  }
  if (layout.tensor_parallel()) {
    const std::unique_ptr<Model> whole = spec.build(Device::cpu());
    TpStrategy(layout.tp).check_model(*whole, layout.mesh, {std::string(mesh_axis::tp)});
  }
}

// The rank's place along `axis` (a mesh axis or "dp"); 0 for "" (an axis no strategy splits).
int coordinate(const MeshLayout& mesh, int rank, std::string_view axis) {
  return axis.empty() ? 0 : mesh.span_coordinate(rank, axis);
}

}  // namespace

std::string RankModelState::where() const {
  std::string list;
  for (size_t i = 0; i < stages.size(); ++i)
    list += (i == 0 ? "" : i + 1 == stages.size() ? " and " : ", ") + std::to_string(stages[i]);
  return detail::concat("rank ", rank, " (pp rank ", pp_rank, ": stage",
                        stages.size() > 1 ? "s " : " ", list, ", tp rank ", tp_rank,
                        ", shard rank ", shard_rank, ")");
}

const RankModelState& ModelStatePrediction::largest() const {
  MT_CHECK(!ranks.empty(), "a prediction without ranks has no largest");
  return *std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.bytes.total() < b.bytes.total();
  });
}

uint64_t ModelStatePrediction::max_sharded_state() const {
  uint64_t most = 0;
  for (const RankModelState& r : ranks) most = std::max(most, r.bytes.sharded_state());
  return most;
}

uint64_t ModelStatePrediction::max_unsharded_unit_buffers() const {
  uint64_t most = 0;
  for (const RankModelState& r : ranks) most = std::max(most, r.bytes.unsharded_unit_buffers);
  return most;
}

ModelStatePrediction model_state_bytes(const ModelSpec& spec, const PlanLayout& layout) {
  check_layout(spec, layout);
  const MeshLayout& mesh = layout.mesh;
  const int pp = layout.pipelined() ? mesh.axis_size(mesh_axis::pp) : 1;
  const int tp = layout.tensor_parallel() ? mesh.axis_size(mesh_axis::tp) : 1;
  const std::string shard_axis = layout.fsdp_shard_axis();

  // The pieces depend on the pp and tp coordinates only; the shard rank picks among the shards.
  std::map<std::pair<int, int>, std::vector<ModelStateBytes>> by_coordinate;
  std::map<int, std::vector<int>> stages_of;
  for (int p = 0; p < pp; ++p)
    for (int t = 0; t < tp; ++t) {
      RankModel rank_model(spec, layout, p, t);
      stages_of[p] = rank_model.stages();
      by_coordinate[{p, t}] =
          layout.data_parallel()
              ? fsdp_shards(rank_model, layout)
              : std::vector<ModelStateBytes>{whole_parameters(rank_model.model())};
    }

  ModelStatePrediction prediction;
  for (int rank = 0; rank < mesh.size(); ++rank) {
    RankModelState r;
    r.rank = rank;
    r.pp_rank = coordinate(mesh, rank, layout.pipelined() ? mesh_axis::pp : "");
    r.tp_rank = coordinate(mesh, rank, layout.tensor_parallel() ? mesh_axis::tp : "");
    r.shard_rank = coordinate(mesh, rank, shard_axis);
    r.stages = stages_of.at(r.pp_rank);
    r.bytes = by_coordinate.at({r.pp_rank, r.tp_rank}).at(r.shard_rank);
    prediction.ranks.push_back(std::move(r));
  }
  return prediction;
}

std::vector<ModelStateBytes> stage_leader_model_states(const ModelSpec& spec,
                                                       const PlanLayout& layout) {
  check_layout(spec, layout);
  const int stages = layout.pipelined() ? layout.mesh.axis_size(mesh_axis::pp) : 1;
  std::vector<ModelStateBytes> out;
  for (int s = 0; s < stages; ++s) {
    RankModel rank_model(spec, layout, s, /*tp_rank=*/0);
    out.push_back(layout.data_parallel() ? fsdp_shards(rank_model, layout).front()
                                         : whole_parameters(rank_model.model()));
  }
  return out;
}

}  // namespace meshtrain

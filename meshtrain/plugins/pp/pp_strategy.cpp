#include "meshtrain/plugins/pp/pp_strategy.h"

#include <map>
#include <set>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/plugins/pp/pipeline_runner.h"

namespace meshtrain {

PpStrategy::PpStrategy(PpOptions options) : options_(std::move(options)) {
  MT_CHECK(options_.virtual_stages >= 1, "pp: virtual stages per rank must be at least 1, got ",
           options_.virtual_stages);
}

void PpStrategy::apply(ParallelContext& ctx, const std::vector<std::string>& axes) {
  MT_CHECK(axes.size() == 1 && axes[0] == mesh_axis::pp, "pp binds to the mesh axis '",
           mesh_axis::pp, "' alone");
  MT_CHECK(!stage_model_, "pp is applied once");
  PipelinePlacement placement;
  placement.schedule = options_.schedule;
  placement.ranks = ctx.mesh.axis_size(mesh_axis::pp);
  placement.virtual_stages = options_.virtual_stages;
  placement.rank = ctx.mesh.axis_rank(mesh_axis::pp);
  // Generating one schedule up front checks the options before any training.
  make_schedule(options_.schedule, placement.ranks, placement.ranks, options_.virtual_stages);

  Model& full = *ctx.model;
  const std::vector<Layer*> layers = full.layers();
  const int stages = placement.ranks * options_.virtual_stages;
  const std::vector<LayerSpan> spans =
      partition_layers(static_cast<int>(layers.size()), stages, options_.layers_per_stage);
  std::vector<LayerSpan> mine;
  for (int s = placement.rank; s < stages; s += placement.ranks) {
    placement.stages.push_back(s);
    mine.push_back(spans[s]);
  }

  // Parameters used by stages on several pp ranks (GPT-2's wte: the embedding and the tied head):
  // each of those ranks holds a copy, and the first one's counts once.
  std::map<Parameter*, std::set<int>> ranks_of;
  for (int s = 0; s < stages; ++s)
    for (int l = spans[s].first; l <= spans[s].last; ++l)
      for (Parameter* p : layers[l]->parameters()) ranks_of[p].insert(s % placement.ranks);
  for (const auto& [param, ranks] : ranks_of) {
    if (ranks.size() < 2 || !ranks.count(placement.rank)) continue;
    for (int r : ranks)
      if (r != placement.rank) placement.tied[param->name()].push_back(r);
    param->set_tied_copy(*ranks.begin() != placement.rank);
  }

  stage_model_ = std::make_unique<StageModel>(full, mine);
  // The other stages' parameters are not this rank's to hold: free them.
  const std::vector<Parameter*> kept_list = stage_model_->parameters();
  const std::set<Parameter*> kept(kept_list.begin(), kept_list.end());
  const std::string elsewhere =
      detail::concat("it lives on another pipeline stage than pp rank ", placement.rank, "'s");
  for (Parameter* p : full.parameters())
    if (!kept.count(p)) p->make_unavailable(elsewhere);
  placement.spans = stage_model_->local_spans();
  ctx.model = stage_model_.get();
  ctx.unit_specs = stage_model_->default_units();
  ctx.pipelined = true;
  ctx.make_runner = [placement](Engine& engine, TrainableState& state, DeviceMesh& mesh,
                                DType activation_dtype) {
    return std::make_unique<PipelineRunner>(engine, state, mesh, placement, activation_dtype);
  };
}

ModelStateShare PpStrategy::model_state_share(const MeshLayout& mesh,
                                              const std::vector<std::string>& /*axes*/) const {
  return {1.0 / mesh.axis_size(mesh_axis::pp)};  // stages balanced by layer count
}

void register_pp(StrategyRegistry& registry) {
  using Type = OptionSpec::Type;
  registry.add(PluginInfo{
      .name = "pp",
      .help = "pipeline parallelism on the pp axis, any schedule",
      .options = {{.name = "schedule", .type = Type::choice, .help = "pipeline schedule",
                   .default_value = "1f1b", .choices = {"gpipe", "1f1b", "interleaved", "zb-h1"},
                   .flag = "--pp-schedule"},
                  {.name = "virtual", .type = Type::integer,
                   .help = "pipeline stages per pp rank (default: 2 for interleaved, else 1)",
                   .minimum = 1, .flag = "--virtual"},
                  {.name = "layers", .type = Type::text,
                   .help = "layers per pipeline stage, e.g. 3,2,2,3 (embedding and head count; "
                           "default: balanced)",
                   .flag = "--pp-layers"}},
      .factory = [](const OptionValues& given) -> std::unique_ptr<Strategy> {
        PpOptions options;
        options.schedule = parse_schedule_kind(given.text("schedule"));
        // As `meshtrain schedule` does: interleaving needs at least two stages per rank.
        if (given.given("virtual"))
          options.virtual_stages = given.integer("virtual");
        else if (options.schedule == ScheduleKind::interleaved)
          options.virtual_stages = 2;
        if (given.given("layers"))
          options.layers_per_stage = parse_layer_counts(given.text("layers"));
        return std::make_unique<PpStrategy>(options);
      }});
}

}  // namespace meshtrain

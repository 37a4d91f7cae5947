#include "apps/train/train_config.h"

#include <filesystem>

#include "core/error.h"
#include "mesh/axis_names.h"
#include "plugins/builtin_strategies.h"

namespace meshtrain {

BackendKind parse_backend(std::string_view text) {
  if (text == "local") return BackendKind::local;
  if (text == "mpi") return BackendKind::mpi;
  if (text == "nccl") return BackendKind::nccl;
  throw InvalidArgument(
      detail::concat("unknown backend '", text, "', expected local, mpi or nccl"));
}

std::string_view backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::local: return "local";
    case BackendKind::mpi: return "mpi";
    case BackendKind::nccl: return "nccl";
  }
  return "unknown";
}

namespace {
// An output file is written at the end of a run (or by rank 0 only): check its folder up front, so
// a typo fails before training rather than after it.
void check_output_path(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  MT_CHECK(parent.empty() || std::filesystem::is_directory(parent), flag, ": the folder '",
           parent.string(), "' does not exist");
}
}  // namespace

TrainConfig& TrainConfig::set(const std::string& plugin, const std::string& key,
                              const std::string& value) {
  strategies[plugin][key] = value;
  return *this;
}

MeshLayout TrainConfig::effective_mesh() const {
  if (mesh.ndim() > 0) return mesh;
  return MeshLayout({{std::string(mesh_axis::dp_shard), world}});
}

void TrainConfig::validate() const {
  model.validate();
  lr.validate();
  MT_CHECK(!data_path.empty(), "--data: a token file is required (make one with meshtrain prepare)");
  MT_CHECK_GT(steps, 0, "--steps must be positive");
  MT_CHECK_GT(batch, 0, "--batch must be positive");
  MT_CHECK_GT(seq, 0, "--seq must be positive");
  MT_CHECK_LE(seq, model.ctx, "--seq must not exceed the model's context length");
  MT_CHECK_GT(grad_accum, 0, "--grad-accum must be positive");
  MT_CHECK_GE(weight_decay, 0.f, "--wd must not be negative");
  MT_CHECK_GE(clip, 0.f, "--clip must not be negative");
  MT_CHECK_GE(world, 1, "--world must be at least 1");
  check_output_path(save_path, "--save");
  MT_CHECK_GE(checkpoint_every, 0, "--checkpoint-every must not be negative");
  MT_CHECK_GE(keep, 0, "--keep must not be negative");
  MT_CHECK(!checkpoint_dir.empty() || (checkpoint_every == 0 && keep == 0),
           "--checkpoint-every and --keep need --checkpoint-dir");
  MT_CHECK(resume_dir.empty() || init_path.empty(),
           "--init and --resume exclude each other: a resume restores the parameters itself");
  check_output_path(metrics_path, "--metrics");
  const MeshLayout layout = effective_mesh();
  layout.check_world_size(world);
  const int64_t dp = layout.span_size(mesh_axis::dp);
  MT_CHECK_EQ(batch % dp, 0, "--batch must divide by the data-parallel degree ", dp);
  MT_CHECK_EQ((batch / dp) % grad_accum, 0, "--batch / data-parallel degree (", batch / dp,
              ") must divide by --grad-accum");
  const int64_t tp = layout.has_axis(mesh_axis::tp) ? layout.axis_size(mesh_axis::tp) : 1;
  MT_CHECK_EQ(model.heads % tp, 0, "--heads (", model.heads,
              ") must divide by tp: tensor parallelism splits attention heads over tp");
  // Every plugin option is parsed once, by its plugin: build them now so a bad one fails here.
  const StrategyRegistry registry = builtin_strategies();
  for (const auto& [plugin, options] : strategies) registry.create(plugin, options);
}

}  // namespace meshtrain

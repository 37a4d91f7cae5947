#include "meshtrain/cli/run_flags.h"

#include <map>
#include <sstream>

#include "meshtrain/cli/declared_flags.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/train/training_checkpoint.h"

namespace meshtrain {

namespace {

// The model: a checkpoint's (resumed or --init), a safetensors file's (--init), a preset's, or a
// family's with every option given (--family). The model flags given override a preset's or a
// resumed checkpoint's options (the trainer then names any difference from the checkpoint) and
// must agree with an --init source's.
ModelSpecPtr choose_model(const RunFlags& f, const ModelRegistry& models) {
  const TrainConfig& c = f.config;
  if (!f.model.empty() && !f.family.empty()) {
    const std::string& family = models.family_of_preset(f.model).name;
    MT_CHECK(family == f.family, "--model ", f.model, " is a ", family, " preset, not a ", f.family,
             " one (--family)");
  }
  const auto of_family = [&](ModelSpecPtr model, const std::string& source) {
    MT_CHECK(f.family.empty() || f.family == model->family(), "--family ", f.family,
             " disagrees with ", source, ", which holds a ", model->family(), " model");
    return model;
  };
  if (!c.init_path.empty()) {
    MT_CHECK(f.model.empty(), "--init takes the model from '", c.init_path, "'; drop --model");
    if (!is_checkpoint_path(c.init_path))
      return of_family(models.from_safetensors(hf_weights_path(c.init_path), f.model_options),
                       "'" + c.init_path + "'");
    const CheckpointReader reader(find_checkpoint(c.init_path, "--init"));
    const std::string source = "checkpoint '" + reader.path() + "'";
    const ModelSpecPtr stored = of_family(checkpoint_model(reader, models), source);
    return models.agreeing(stored->family(), stored->options(), f.model_options, source);
  }
  if (!f.model.empty()) return models.preset(f.model, f.model_options);
  if (!c.resume_dir.empty()) {
    const ModelSpecPtr stored =
        checkpoint_model(CheckpointReader(find_checkpoint(c.resume_dir, "--resume")), models);
    if (!f.family.empty() && f.family != stored->family())
      return models.create(f.family, f.model_options);
    TextOptions options = f.model_options;
    const TextOptions stored_options = stored->options();
    options.insert(stored_options.begin(), stored_options.end());  // keeps the flags
    return models.create(stored->family(), options);
  }
  if (!f.family.empty()) return models.create(f.family, f.model_options);
  return models.preset("demo", f.model_options);
}

// "dp_replicate=ddp,tp=tp" -> axis -> plugin. Whether each plugin and axis exists is the
// trainer's to check (bound_strategies.h), with the registry and the mesh at hand.
std::map<std::string, std::string> parse_axis_plugins(const std::string& text) {
  std::map<std::string, std::string> bound;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    const bool well_formed = eq != std::string::npos && eq > 0 && eq + 1 < item.size();
    MT_CHECK(well_formed,
             "--axis-plugins: expected AXIS=PLUGIN items separated by commas, such as "
             "dp_replicate=ddp; got '",
             item, "' in '", text, "'");
    const std::string axis = item.substr(0, eq);
    MT_CHECK(bound.emplace(axis, item.substr(eq + 1)).second, "--axis-plugins binds axis '", axis,
             "' twice in '", text, "'");
  }
  return bound;
}

}  // namespace

void add_model_choice_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f,
                            const ModelRegistry& models) {
  cmd->add_option("--model", f->model,
                  "model preset: " + listed(models.preset_names(), ", ") + " (default demo)");
  cmd->add_option("--family", f->family,
                  "model family, with every option as flags, instead of a preset: " +
                      listed(models.names(), ", "));
  add_model_flags(cmd, models, f->model_options);
}

void add_workload_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f) {
  TrainConfig& c = f->config;
  cmd->add_option("--batch", c.batch, "global sequences per step")->capture_default_str();
  cmd->add_option("--seq", c.seq, "tokens per sequence")->capture_default_str();
  cmd->add_option("--grad-accum,--microbatches", c.grad_accum,
                  "micro-batches per step (what a pipeline schedule streams)")
      ->capture_default_str();
  cmd->add_option("--ac", f->ac,
                  "activation checkpointing: none, full (every block recomputes its forward in "
                  "backward, keeping only its input) or selective (every --ac-every-th block)")
      ->capture_default_str();
  cmd->add_option("--ac-every", c.ac.every,
                  "selective activation checkpointing: recompute "
                  "blocks 0, k, 2k, ...")
      ->capture_default_str();
}

void add_layout_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f,
                      const Registries& registries) {
  cmd->add_option("--world", f->config.world, "number of ranks")->capture_default_str();
  cmd->add_option("--mesh", f->mesh,
                  "mesh axes in the order pp, dp_replicate, dp_shard, tp, e.g. "
                  "dp_replicate=2,dp_shard=2,tp=2 (default: dp_shard=world)");
  cmd->add_option("--axis-plugins", f->axis_plugins,
                  "plugins that serve mesh axes instead of the built-in ones, as AXIS=PLUGIN "
                  "items separated by commas (a program's own plugins: meshtrain/cli/"
                  "command_line.h); plugins: " +
                      listed(registries.plugins.names(), ", "));
  const StrategyRegistry& registry = registries.plugins;
  for (const std::string& plugin : registry.names())
    for (const OptionSpec& option : registry.plugin(plugin).options)
      add_declared_flag(cmd, plugin, option, [f, plugin, name = option.name](const std::string& v) {
        f->config.set(plugin, name, v);
      });
}

void apply_run_flags(RunFlags& f, const Registries& registries) {
  TrainConfig& c = f.config;
  c.model = choose_model(f, registries.models);
  c.plugins = std::make_shared<const StrategyRegistry>(registries.plugins);
  c.axis_plugins = parse_axis_plugins(f.axis_plugins);
  c.ac.mode = parse_ac_mode(f.ac);
  if (!f.mesh.empty()) c.mesh = parse_mesh_spec(f.mesh);
}

}  // namespace meshtrain

// The flags that say what a run trains and how it is laid out, which `meshtrain train` and
// `meshtrain plan` share: the model (a preset, or a family with its option flags), the step's
// workload (--batch, --seq, --grad-accum) and activation checkpointing, the world, its mesh, the
// plugins serving its axes and their options. Each command adds its own flags beside them.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "meshtrain/cli/command_line.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

struct RunFlags {
  TrainConfig config;
  std::string model;          // a preset; empty: "demo", or the model of the checkpoint or file
  std::string family;         // a family whose every option the flags give, instead of a preset
  TextOptions model_options;  // the model flags given (--layers 6: "layers" -> "6")
  std::string ac = "none";
  std::string mesh;
  std::string axis_plugins;  // "axis=plugin,...": plugins that serve axes instead of the built-ins
};

// --model, --family and every family's option flags.
void add_model_choice_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f,
                            const ModelRegistry& models);
// --batch, --seq, --grad-accum, --ac and --ac-every.
void add_workload_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f);
// --world, --mesh, --axis-plugins and every plugin's option flags.
void add_layout_flags(CLI::App* cmd, const std::shared_ptr<RunFlags>& f,
                      const Registries& registries);

// Sets f.config's model (a checkpoint's under --init or --resume, a file's under --init, a
// preset's or a family's), plugins, axis plugins, activation checkpointing and mesh from the flags.
void apply_run_flags(RunFlags& f, const Registries& registries);

}  // namespace meshtrain

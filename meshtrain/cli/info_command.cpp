#include <iostream>

#include "meshtrain/cli/commands.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/config.h"

namespace meshtrain {

void add_info_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand("info", "Show what this build contains");
  cmd->callback([&registries] {
    std::cout << "meshtrain " << config::version << "\n"
              << "  cuda:  " << (config::has_cuda ? "built in" : "not built") << " ("
              << cuda_device_count() << " GPUs visible)\n"
              << "  nccl:  " << (config::has_nccl ? "built in" : "not built") << "\n"
              << "  mpi:   " << (config::has_mpi ? "built in" : "not built") << "\n"
              << "  local: built in\n"
              << "  models:\n";
    const ModelRegistry& models = registries.models;
    for (const std::string& family : models.names()) {
      std::cout << "    " << family << " (" << models.family(family).help << "):";
      for (const auto& [preset, options] : models.family(family).presets) std::cout << " " << preset;
      std::cout << "\n";
    }
    std::cout << "  plugins:\n";
    for (const std::string& plugin : registries.plugins.names())
      std::cout << "    " << plugin << " (" << registries.plugins.plugin(plugin).help << ")\n";
  });
}

}  // namespace meshtrain

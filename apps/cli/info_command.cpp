#include <iostream>

#include "apps/cli/commands.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/config.h"
#include "meshtrain/models/gpt2_config.h"

namespace meshtrain {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show what this build contains");
  cmd->callback([] {
    std::cout << "meshtrain " << config::version << "\n"
              << "  cuda:  " << (config::has_cuda ? "built in" : "not built") << " ("
              << cuda_device_count() << " GPUs visible)\n"
              << "  nccl:  " << (config::has_nccl ? "built in" : "not built") << "\n"
              << "  mpi:   " << (config::has_mpi ? "built in" : "not built") << "\n"
              << "  local: built in\n"
              << "  models:";
    for (const std::string& name : gpt2_preset_names()) std::cout << " " << name;
    std::cout << "\n";
  });
}

}  // namespace meshtrain

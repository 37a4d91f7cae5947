#include "meshtrain/cli/command_line.h"

#include <csignal>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "meshtrain/cli/commands.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/plugins/builtin_strategies.h"
#include "meshtrain/train/job_error.h"

namespace meshtrain {

Registries builtin_registries() { return {builtin_models(), builtin_strategies()}; }

int run_command_line(int argc, const char* const* argv, const Registries& registries) {
  // Past a file-size limit (ulimit -f) a write should fail with an error naming the file, not kill
  // the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"meshtrain: train transformer models on a device mesh (FSDP, tensor and pipeline parallel)"};
  app.require_subcommand(1);
  add_train_command(app, registries);
  add_prepare_command(app);
  add_info_command(app, registries);
  add_schedule_command(app);
  add_plan_command(app, registries);
  add_sweep_command(app, registries);
  add_convert_command(app, registries);
  add_generate_command(app, registries);
  add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) let_rank_zero_report_first();
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    let_rank_zero_report_first();
    std::cerr << "meshtrain: error: out of memory; lower --batch, --seq or --world, or shard more\n";
    return 1;
  } catch (const std::exception& e) {  // meshtrain's errors, and libraries' (JSON, the filesystem)
    let_rank_zero_report_first();
    std::cerr << "meshtrain: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace meshtrain

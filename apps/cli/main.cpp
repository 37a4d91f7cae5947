// meshtrain: the command line. Subcommands: train, prepare, info, schedule, convert.
#include <csignal>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>

#include "apps/cli/commands.h"
#include "meshtrain/train/job_error.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write should fail with an error naming the file, not kill
  // the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"meshtrain: train transformer models on a device mesh (FSDP, tensor and pipeline parallel)"};
  app.require_subcommand(1);
  meshtrain::add_train_command(app);
  meshtrain::add_prepare_command(app);
  meshtrain::add_info_command(app);
  meshtrain::add_schedule_command(app);
  meshtrain::add_convert_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) meshtrain::let_rank_zero_report_first();
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    meshtrain::let_rank_zero_report_first();
    std::cerr << "meshtrain: error: out of memory; lower --batch, --seq or --world, or shard more\n";
    return 1;
  } catch (const std::exception& e) {  // meshtrain's errors, and libraries' (JSON, the filesystem)
    meshtrain::let_rank_zero_report_first();
    std::cerr << "meshtrain: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/config_file.h"
#include "meshtrain/cli/run_flags.h"
#include "meshtrain/train/dry_run.h"
#include "meshtrain/train/launcher.h"
#include "meshtrain/train/run_training.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

struct TrainFlags : RunFlags {
  std::string backend = "local";
  std::string device = "cpu";
  std::string config_file;
  bool print_config = false;
  bool dry_run = false;
};

// Under mpirun every process runs this command: on the local backend each would train its own
// job, print its own output and write the same files. Refuse that.
void check_launcher(const TrainConfig& c) {
  const std::optional<int> processes = mpirun_processes();
  if (!processes || *processes <= 1) return;
  MT_CHECK(c.backend != BackendKind::local, "running under mpirun with ", *processes,
           " processes but --backend local: every process would train a job of its own; pass "
           "--backend mpi (or nccl with --device cuda) --world ",
           *processes);
}

void apply(TrainFlags& f, const Registries& registries) {
  apply_run_flags(f, registries);
  TrainConfig& c = f.config;
  c.backend = parse_backend(f.backend);
  MT_CHECK(f.device == "cpu" || f.device == "cuda", "--device: expected cpu or cuda, got '",
           f.device, "'");
  c.device = f.device == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
  if (f.dry_run) c.device = DeviceKind::meta;  // the same run on shape-only tensors
  check_launcher(c);
}

}  // namespace

void add_train_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand("train", "Train a model on a device mesh");
  auto f = std::make_shared<TrainFlags>();
  TrainConfig& c = f->config;
  const ModelRegistry& models = registries.models;
  add_model_choice_flags(cmd, f, models);
  cmd->add_option("--init", c.init_path,
                  "start from a Hugging Face model (a safetensors file or a sharded "
                  "model.safetensors.index.json with config.json beside it, or their folder) or a "
                  "checkpoint's parameters (a step-N folder, or a --checkpoint-dir folder: its "
                  "newest)")
      ->check(CLI::ExistingPath);
  cmd->add_option("--data", c.data_path,
                  "token file (meshtrain prepare makes one); required, here or in --config")
      ->check(CLI::ExistingFile);
  cmd->add_option("--val-data", c.val_data_path,
                  "validation token file (default with --val-every: the last tenth of --data, "
                  "held out of training)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--val-every", c.val_every,
                  "validate every N steps and after the last: the mean loss over --val-batches "
                  "batches, forward only (0: never)")
      ->capture_default_str()
      ->check(kNonNegativeInteger);
  cmd->add_option("--val-batches", c.val_batches,
                  "batches of --batch x --seq tokens each validation reads, the same every time")
      ->capture_default_str()
      ->check(kPositiveInteger);
  cmd->add_option("--steps", c.steps, "optimizer steps")->capture_default_str();
  add_workload_flags(cmd, f);
  cmd->add_option("--lr", c.lr.lr, "learning rate")->capture_default_str();
  cmd->add_option("--warmup", c.lr.warmup_steps, "linear warmup steps");
  cmd->add_option("--decay-steps", c.lr.decay_steps, "cosine decay to --min-lr by this step");
  cmd->add_option("--min-lr", c.lr.min_lr, "learning rate at the end of the decay");
  cmd->add_option("--wd", c.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--clip", c.clip, "clip the global gradient norm (0: off)")
      ->capture_default_str();
  cmd->add_option("--seed", c.seed, "initialisation and sampling seed")
      ->capture_default_str()
      ->check(kNonNegativeInteger);
  cmd->add_option("--save", c.save_path, "write the trained model (safetensors)")
      ->check(kNonEmptyPath);
  cmd->add_option("--metrics", c.metrics_path, "write per-step metrics (JSON lines)")
      ->check(kNonEmptyPath);
  cmd->add_option("--report", c.report_dir,
                  "write a report of the run to DIR/index.html at its end: charts of loss, "
                  "throughput, step time and memory per rank, the configuration and the sample "
                  "(docs/report.md); from the --metrics file, or DIR/metrics.jsonl without one")
      ->check(kNonEmptyPath);
  cmd->add_option("--trace", c.trace_dir,
                  "write a Chrome trace per rank to this folder (DIR/rank_<r>.json; open in "
                  "Perfetto or chrome://tracing; docs/tracing.md)")
      ->check(kNonEmptyPath);
  cmd->add_flag("--profile", c.profile,
                "print a profile at the end: time per kernel, exposed and in-flight "
                "communication, achieved FLOP/s");
  cmd->add_option("--checkpoint-dir", c.checkpoint_dir,
                  "write distributed checkpoints here (docs/checkpoint.md); each rank writes "
                  "only its own shards")
      ->check(kNonEmptyPath);
  cmd->add_option("--checkpoint-every", c.checkpoint_every,
                  "steps between checkpoints (0: only after the last step)")
      ->capture_default_str();
  cmd->add_option("--keep", c.keep, "newest checkpoints to keep (0: all)")->capture_default_str();
  cmd->add_option("--resume", c.resume_dir,
                  "resume from the newest complete checkpoint in this folder: parameters, AdamW "
                  "state, step and data position (--steps stays the run's total)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--timeout", c.timeout_s,
                  "seconds any collective may wait before the job ends with an error naming the "
                  "operation and the rank it waited for")
      ->capture_default_str()
      ->check(kPositiveInteger);
  cmd->add_option("--threads", c.threads,
                  "CPU threads per rank (default: this machine's CPUs split among its ranks)")
      ->check(kPositiveInteger);
  cmd->add_option("--backend", f->backend, "local, mpi or nccl")->capture_default_str();
  cmd->add_option("--device", f->device,
                  "cpu, or cuda: every rank's state on a GPU (local ranks share the GPUs)")
      ->capture_default_str();
  add_layout_flags(cmd, f, registries);
  cmd->add_option("--sample", c.sample_bytes, "bytes of text to sample at the end (0: none)")
      ->capture_default_str()
      ->check(kNonNegativeInteger);
  cmd->add_option("--log-every", c.log_every,
                  "keep a progress line every N steps, and the first and last (0: steps / 20); "
                  "on a terminal the steps between redraw one live line")
      ->check(kNonNegativeInteger);
  cmd->add_flag("--quiet", c.quiet, "print nothing but errors");
  cmd->add_option("--config", f->config_file,
                  "read the settings from a TOML file (configs/demo.toml); flags given override "
                  "it")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--print-config", f->print_config,
                "check the run, print its effective configuration as a --config file and exit");
  cmd->add_flag("--dry-run", f->dry_run,
                "run one step of every rank on shape-only tensors (no compute; --data, --steps, "
                "--sample and --threads are not used) and print each rank's memory by category "
                "and bytes sent per mesh axis, as the run would count them");
  cmd->callback([f, cmd, &registries, keys = train_config_keys(models, registries.plugins)] {
    // The file's settings fill what the command line left unset (meshtrain/cli/config_file.h).
    if (!f->config_file.empty()) apply_config_file(*cmd, f->config_file, keys);
    apply(*f, registries);
    MT_CHECK(!(f->print_config && f->dry_run),
             "--print-config prints a run's settings and --dry-run runs it on shape-only "
             "tensors: give one of them");
    if (f->print_config) {
      f->config.validate();
      std::cout << effective_config(f->config, registries.models);
      return;
    }
    if (f->dry_run) {
      print_dry_run(f->config, dry_run(f->config), std::cout);
      return;
    }
    // The report shows the run as a --config file. A configuration that cannot be described is
    // refused by run_training's validation, with its own message.
    if (!f->config.report_dir.empty()) {
      try {
        f->config.report_config = effective_config(f->config, registries.models);
      } catch (const Error&) {
      }
    }
    // mpirun hands its ranks a terminal even when its own output is a file: plain lines there.
    const bool interactive = isatty(STDOUT_FILENO) != 0 && !mpirun_processes();
    run_training(f->config, std::cout, interactive);
  });
}

}  // namespace meshtrain

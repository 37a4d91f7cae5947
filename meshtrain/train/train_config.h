// Everything a training run is configured with, from C++ or from `meshtrain train` flags.
#pragma once

#include <cstdint>
#include <chrono>
#include <map>
#include <string>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/lr_schedule.h"
#include "meshtrain/parallel/activation_checkpointing.h"
#include "meshtrain/parallel/strategy_registry.h"
#include "meshtrain/plugins/builtin_strategies.h"

namespace meshtrain {

enum class BackendKind { local, mpi, nccl };
BackendKind parse_backend(std::string_view text);
std::string_view backend_name(BackendKind kind);

// Without a validation file, the last 1/kValHeldOutDivisor of the data's tokens are held out of
// training for validation (nanoGPT's 90/10 split).
constexpr int64_t kValHeldOutDivisor = 10;

struct TrainConfig {
  // The model to train: a registered family's (meshtrain/models/model_registry.h), GPT-2's
  // (gpt2_model(gpt2_preset("tiny"))), or any ModelSpec a program defines.
  ModelSpecPtr model = gpt2_model(gpt2_preset("demo"));
  // Weights to start from: a safetensors file, or a checkpoint (a step directory, or a folder whose
  // newest complete checkpoint is taken); empty: initialise from the seed.
  std::string init_path;
  std::string data_path;  // llm.c token file
  // Validation (docs/data.md, "Validation"): every val_every steps (0: never) and after the
  // last, the mean loss over val_batches batches of the training batch's shape, forward only, the
  // same batches every time: from val_data_path, or when that is empty from the last tenth of
  // data_path's tokens, which training then leaves out (kValHeldOutDivisor).
  std::string val_data_path;
  int64_t val_every = 0;
  int64_t val_batches = 20;
  int64_t steps = 100;
  int64_t batch = 8;       // global sequences per optimizer step
  int64_t seq = 64;        // tokens per sequence
  int64_t grad_accum = 1;  // micro-batches per step
  // Which blocks keep only their input and recompute their forward in backward
  // (meshtrain/parallel/activation_checkpointing.h): none, all (full) or every k-th (selective).
  ActivationCheckpointing ac;
  LrSchedule lr;
  float weight_decay = 0.0f;
  float clip = 0.0f;  // max global gradient norm; 0 disables clipping
  uint64_t seed = 1337;
  std::string save_path;     // safetensors of the trained model (written by rank 0)
  // Distributed checkpoints (docs/checkpoint.md): written to checkpoint_dir every
  // checkpoint_every steps (0: only after the last step), keeping the newest `keep` (0: all).
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int64_t keep = 0;
  // Resumes from the newest complete checkpoint in this folder (or this step directory): the
  // parameters, AdamW state, step and data position; `steps` stays the run's total.
  std::string resume_dir;
  std::string metrics_path;  // JSON lines, one object per step
  // The run's report (docs/report.md): rank 0 writes report_dir/index.html at the end, drawn from
  // the metrics file (metrics_file(): metrics_path, or report_dir/metrics.jsonl when that is
  // empty), showing report_config as the run's configuration (the command line's --print-config
  // text; empty: the model, mesh, plan and main settings only).
  std::string report_dir;
  std::string report_config;
  // Chrome traces (docs/tracing.md): each rank writes trace_dir/rank_<r>.json at the end of the
  // run (and of a failed run); empty: no tracing.
  std::string trace_dir;
  // Rank 0 prints a profile table at the end: time per kernel kind, exposed and total
  // communication, achieved FLOP/s.
  bool profile = false;
  int world = 1;
  BackendKind backend = BackendKind::local;
  // Every collective wait ends after this long with an error naming the operation and the rank
  // that did not arrive; the whole job then ends (a hang is a bug, on every backend).
  int64_t timeout_s = 120;
  // CPU threads of each rank (its kernels, OpenBLAS and oneDNN); 0: the CPUs this process may use
  // split evenly among the ranks that share them (threads_per_rank()).
  int threads = 0;
  // Where each rank keeps its parameters, gradients, activations and optimizer state: the host,
  // or CUDA GPUs. Local ranks share the visible GPUs round robin (rank r on cuda:(r mod GPUs)),
  // so one GPU can hold a whole simulated mesh. Meta: a dry run (--dry-run), every rank on
  // shape-only tensors, counting what it would hold and send without computing or reading data.
  DeviceKind device = DeviceKind::cpu;
  MeshLayout mesh;  // default: dp_shard over the whole world
  // Options of each plugin by name ("fsdp": mode, prefetch, ...; "tp": sequence_parallel), as
  // the strategy registry reads them (meshtrain/plugins/builtin_strategies.h); unset options take the
  // plugin's defaults.
  std::map<std::string, TextOptions> strategies;
  // The plugins the plan is built from, by name: the built-ins, or a program's registry with its
  // own beside them.
  std::shared_ptr<const StrategyRegistry> plugins =
      std::make_shared<const StrategyRegistry>(builtin_strategies());
  // Mesh axis -> the plugin of `plugins` that serves it, where not the built-in choice
  // (plugin_for_axis: the data axes fsdp, tp tp, pp pp): {"dp_replicate", "ddp"}.
  std::map<std::string, std::string> axis_plugins;
  int64_t sample_bytes = 200;  // text generated at the end (byte-level models); 0: none
  // A progress line kept every log_every steps (and at the first and the last); 0: steps / 20.
  // On a terminal the steps between redraw one live line in place.
  int64_t log_every = 0;
  bool quiet = false;

  // Whether the run validates (val_every > 0), and whether it then holds out part of data_path.
  bool validates() const { return val_every > 0; }
  bool holds_out_validation() const { return validates() && val_data_path.empty(); }
  bool dry_run() const { return device == DeviceKind::meta; }
  // The metrics file the run writes: metrics_path, or with a report and no metrics_path,
  // report_dir/metrics.jsonl; empty: none.
  std::string metrics_file() const;
  // The mesh to run on: the given one, or dp_shard=world.
  MeshLayout effective_mesh() const;
  // The ranks sharing this machine: local ranks are threads of this process, mpirun's are
  // processes of this machine.
  int ranks_on_this_machine() const;
  // --threads, or the CPUs this process may use / ranks_on_this_machine() (at least 1).
  int threads_per_rank() const;
  // The device of rank `rank` of this machine (InvalidArgument when --device cuda finds no GPU).
  Device rank_device(int rank) const;
  // Sets one plugin option: config.set("fsdp", "mode", "hybrid").
  TrainConfig& set(const std::string& plugin, const std::string& key, const std::string& value);
  // InvalidArgument naming the flag and what was expected: every size in range before anything is
  // multiplied or allocated, outputs writable (and with room, where the file system says) before
  // the first step, and, on the local backend, the whole world's estimated memory within the
  // machine's.
  void validate() const;
  // The part of validate() that concerns the model, the step and the layout alone: sizes in
  // range, the mesh the world's size, the batch split over the data ranks and micro-batches, every
  // strategy's checks of the planned run. What `meshtrain plan` checks: no machine, data or
  // output is involved.
  void check_layout() const;

 private:
  // The flags a dry run cannot honour (outputs, inputs with values, other backends), before
  // anything is checked that they would make irrelevant (offload is refused after the plan).
  void check_dry_run() const;
};

}  // namespace meshtrain

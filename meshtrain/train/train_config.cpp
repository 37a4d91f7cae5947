#include "meshtrain/train/train_config.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "meshtrain/train/bound_strategies.h"
#include "meshtrain/train/launcher.h"
#include "meshtrain/train/reporter.h"
#include "meshtrain/train/run_estimate.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/checkpoint/hf_config_file.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/config.h"

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
std::string folder_of(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// `folder` exists (checked by the caller) and takes `what`, of about `bytes`.
void check_writable(const std::string& folder, const char* flag, const char* what, double bytes) {
  MT_CHECK(access(folder.c_str(), W_OK) == 0, flag, ": the folder '", folder, "' is not writable");
  const double free = free_disk_bytes(folder);
  MT_CHECK(free < 0 || free >= bytes, flag, ": the file system of '", folder, "' has ",
           format_bytes(static_cast<uint64_t>(free)), " free, ", what, " needs about ",
           format_bytes(static_cast<uint64_t>(bytes)));
}

// An output is written after training (or as it goes): check it before the first step, so a typo,
// a directory in the way or a full disk fails now rather than after the run.
void check_output_file(const std::string& path, const char* flag, double bytes) {
  if (path.empty()) return;
  const std::string folder = folder_of(path);
  MT_CHECK(std::filesystem::is_directory(folder), flag, ": the folder '", folder,
           "' does not exist");
  check_regular_output(path, flag);
  check_writable(folder, flag, "the file", bytes);
}

void check_output_folder(const std::string& dir, const char* flag, double bytes) {
  if (dir.empty()) return;
  if (!std::filesystem::exists(dir)) {
    try {
      check_output_file(dir, flag, bytes);  // created by the first save: its folder must take it
      return;
    } catch (const Error&) {
      // Under mpirun another process of the job may have created it since (rank 0 takes the
      // folder's lock while the others still check their flags): then it is checked as a folder.
      if (!std::filesystem::is_directory(dir)) throw;
    }
  }
  MT_CHECK(std::filesystem::is_directory(dir), flag, " '", dir, "' exists and is not a folder");
  check_writable(dir, flag, "a checkpoint", bytes);
}

// Sizes are multiplied into element counts and byte counts: bound each one first.
void check_range(int64_t value, int64_t most, const char* flag) {
  MT_CHECK(value <= most, flag, " ", value, " is out of range; at most ", most);
}
}  // namespace

TrainConfig& TrainConfig::set(const std::string& plugin, const std::string& key,
                              const std::string& value) {
  strategies[plugin][key] = value;
  return *this;
}

std::string TrainConfig::metrics_file() const {
  if (!metrics_path.empty() || report_dir.empty()) return metrics_path;
  return (std::filesystem::path(report_dir) / "metrics.jsonl").string();
}

MeshLayout TrainConfig::effective_mesh() const {
  if (mesh.ndim() > 0) return mesh;
  return MeshLayout({{std::string(mesh_axis::dp_shard), world}});
}

int TrainConfig::ranks_on_this_machine() const {
  return backend == BackendKind::local ? world : mpirun_local_processes().value_or(1);
}

int TrainConfig::threads_per_rank() const {
  if (threads > 0) return threads;
  return std::max(1, ops::cpu::available_cpus() / std::max(1, ranks_on_this_machine()));
}

Device TrainConfig::rank_device(int rank) const {
  if (device == DeviceKind::cpu) return Device::cpu();
  if (device == DeviceKind::meta) return Device::meta();
  const int gpus = cuda_device_count();
  MT_CHECK(gpus > 0, "--device cuda: no CUDA device is visible",
           config::has_cuda ? "" : " (this build of meshtrain has no CUDA support)");
  return Device::cuda(rank % gpus);
}

void TrainConfig::check_dry_run() const {
  // Nothing is computed or timed, so there is nothing to read, keep or show.
  for (const auto& [path, flag] : {std::pair{&init_path, "--init"},
                                   {&resume_dir, "--resume"},
                                   {&save_path, "--save"},
                                   {&checkpoint_dir, "--checkpoint-dir"},
                                   {&metrics_path, "--metrics"},
                                   {&report_dir, "--report"},
                                   {&trace_dir, "--trace"},
                                   {&val_data_path, "--val-data"}})
    MT_CHECK(path->empty(), "--dry-run computes nothing, so it has nothing to read or write: drop ",
             flag, " '", *path, "'");
  MT_CHECK(!validates(), "--dry-run counts training steps only: drop --val-every ", val_every);
  MT_CHECK(!profile, "--dry-run computes nothing to profile: drop --profile");
  MT_CHECK(backend == BackendKind::local,
           "--dry-run simulates every rank as a thread of the local backend: drop --backend ",
           backend_name(backend));
}

void TrainConfig::check_layout() const {
  MT_CHECK(model != nullptr, "TrainConfig: no model");
  MT_CHECK(batch > 0, "--batch must be positive, got ", batch);
  MT_CHECK(seq > 0, "--seq must be positive, got ", seq);
  MT_CHECK(model->max_seq() == 0 || seq <= model->max_seq(), "--seq ", seq,
           " exceeds the model's context length ", model->max_seq());
  MT_CHECK(grad_accum > 0, "--grad-accum must be positive, got ", grad_accum);
  MT_CHECK(ac.every >= 1, "--ac-every (selective activation checkpointing recomputes every k-th "
           "block) must be positive, got ", ac.every);
  MT_CHECK(world >= 1, "--world must be at least 1, got ", world);
  check_range(batch, int64_t{1} << 24, "--batch");
  check_range(grad_accum, batch, "--grad-accum");
  check_range(world, 1 << 16, "--world");
  const MeshLayout layout = effective_mesh();
  layout.check_world_size(world);
  const int64_t dp = layout.span_size(mesh_axis::dp);
  MT_CHECK(batch % dp == 0, "--batch must divide by the data-parallel degree ", dp, ", got ",
           batch);
  MT_CHECK((batch / dp) % grad_accum == 0, "--batch / data-parallel degree (", batch / dp,
           ") must divide by --grad-accum ", grad_accum);
  // Every plugin option is checked against its plugin's declarations, and every strategy checks
  // the planned layout: a bad one fails here, before any rank is built.
  check_planned_run(bind_strategies(*this), *this);
}

void TrainConfig::validate() const {
  lr.validate();
  if (dry_run()) check_dry_run();
  MT_CHECK(dry_run() || !data_path.empty(),
           "--data: a token file is required (make one with meshtrain prepare)");
  MT_CHECK(steps > 0, "--steps must be positive, got ", steps);
  check_layout();
  MT_CHECK(weight_decay >= 0.f, "--wd must not be negative, got ", weight_decay);
  MT_CHECK(clip >= 0.f, "--clip must not be negative, got ", clip);
  MT_CHECK(timeout_s > 0, "--timeout must be positive (seconds), got ", timeout_s);
  MT_CHECK(threads >= 0, "--threads must be positive (or 0: the CPUs split among the ranks), got ",
           threads);
  check_range(threads, ops::cpu::kMaxCpuThreads, "--threads");
  check_range(steps, int64_t{1} << 40, "--steps");
  // In nanoseconds past now, a deadline overflows near 9.2e9 s; 1e8 s is over three years.
  check_range(timeout_s, int64_t{100'000'000}, "--timeout");
  MT_CHECK(val_every >= 0, "--val-every must not be negative (0: no validation), got ", val_every);
  MT_CHECK(val_batches >= 1, "--val-batches must be positive, got ", val_batches);
  check_range(val_batches, int64_t{1} << 20, "--val-batches");
  MT_CHECK(val_data_path.empty() || validates(), "--val-data '", val_data_path,
           "' is read only with --val-every N (validate every N steps)");
  const double params = static_cast<double>(model->num_parameters());
  check_output_file(save_path, "--save", 4.0 * params);
  check_output_file(metrics_path, "--metrics", 0.0);
  // No output may overwrite an input, or another output.
  for (const auto& [output, flag] :
       {std::pair{&save_path, "--save"}, {&metrics_path, "--metrics"}}) {
    check_output_is_not_input(*output, flag, data_path, "the --data file");
    check_output_is_not_input(*output, flag, val_data_path, "the --val-data file");
    check_output_is_not_input(*output, flag, init_path, "the --init path");
  }
  check_output_is_not_input(metrics_path, "--metrics", save_path, "the --save file");
  if (!save_path.empty()) check_hf_config_target(*model, save_path, "--save");
  check_output_folder(trace_dir, "--trace", 0.0);
  check_output_folder(report_dir, "--report", 0.0);
  if (!report_dir.empty()) {
    // The files the report folder will hold: the page, and the metrics when --metrics is not given.
    const std::string page = (std::filesystem::path(report_dir) / "index.html").string();
    std::vector<std::string> files = {page};
    if (metrics_path.empty()) files.push_back(metrics_file());
    for (const std::string& file : files) {
      if (std::filesystem::is_directory(report_dir)) check_regular_output(file, "--report");
      check_output_is_not_input(file, "--report", data_path, "the --data file");
      check_output_is_not_input(file, "--report", val_data_path, "the --val-data file");
      check_output_is_not_input(file, "--report", init_path, "the --init path");
      check_output_is_not_input(file, "--report", save_path, "the --save file");
    }
    check_output_is_not_input(metrics_path, "--metrics", page, "the --report page");
  }
  check_output_folder(checkpoint_dir, "--checkpoint-dir", 12.0 * params);
  MT_CHECK(checkpoint_every >= 0, "--checkpoint-every must not be negative, got ",
           checkpoint_every);
  MT_CHECK(keep >= 0, "--keep must not be negative, got ", keep);
  MT_CHECK(sample_bytes >= 0, "--sample must not be negative (0: no sample), got ", sample_bytes);
  check_range(sample_bytes, int64_t{1} << 20, "--sample");  // a typo must not sample for hours
  MT_CHECK(log_every >= 0, "--log-every must not be negative (0: every steps / 20), got ",
           log_every);
  MT_CHECK(!checkpoint_dir.empty() || (checkpoint_every == 0 && keep == 0),
           "--checkpoint-every and --keep need --checkpoint-dir");
  MT_CHECK(resume_dir.empty() || init_path.empty(),
           "--init and --resume exclude each other: a resume restores the parameters itself");
  MT_CHECK(device == DeviceKind::cpu || backend != BackendKind::mpi,
           "--device cuda runs on the local backend (ranks as threads sharing the GPUs) or the "
           "nccl backend (a process per GPU); --backend mpi moves host buffers");
  MT_CHECK(backend != BackendKind::nccl || device == DeviceKind::cuda,
           "--backend nccl moves GPU buffers: add --device cuda");
  if (device == DeviceKind::cuda) rank_device(0);  // a GPU is there
  MT_CHECK(!dry_run() || !model_state_share(bind_strategies(*this), effective_mesh()).on_host,
           "--dry-run counts shape-only device tensors, and offloading keeps real host copies of "
           "the model state: drop --offload (offloading moves the parameters, gradients and "
           "optimizer state off the device; the rest is as without it)");
  // Host memory bounds a host run, and a GPU run's offloaded state.
  const HostBytes per_rank = estimate_rank_host_bytes(*this);
  const double machine = machine_memory_bytes();
  const int ranks_here = ranks_on_this_machine();
  const auto mib = [](double bytes) { return static_cast<int64_t>(bytes / (1 << 20)); };
  MT_CHECK(machine == 0.0 || per_rank.bytes * ranks_here <= machine, "the run needs at least ",
           mib(per_rank.bytes * ranks_here), " MiB of host memory (", mib(per_rank.bytes),
           " MiB for each of ", ranks_here, " rank", ranks_here > 1 ? "s" : "",
           " on this machine: ", per_rank.parts, "), the machine has ", mib(machine),
           " MiB; lower --world, --batch or --seq, shard more",
           device == DeviceKind::cuda ? ", or drop --offload" : "");
}

}  // namespace meshtrain

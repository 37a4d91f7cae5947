#include "meshtrain/train/run_training.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "meshtrain/train/fault_injection.h"
#include "meshtrain/train/job_error.h"
#include "meshtrain/train/reporter.h"
#include "meshtrain/train/trace_output.h"
#include "meshtrain/train/trainer.h"
#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/core/error.h"
#include "meshtrain/report/run_report.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_MPI
#include "meshtrain/core/comm/mpi/mpi_world.h"
#endif
#if MESHTRAIN_HAS_NCCL
#include "meshtrain/train/launcher.h"
#include "meshtrain/core/comm/nccl/nccl_world.h"
#include "meshtrain/core/comm/store.h"
#endif

namespace meshtrain {

namespace {

CommOptions comm_options(const TrainConfig& config) {
  return CommOptions{std::chrono::seconds(config.timeout_s)};
}

// --profile: every rank's figures over the steps, printed by rank 0 (collective).
void report_profile(const TrainConfig& config, Communicator& world,
                    const trace::Recorder& recorder, TrainReporter* reporter) {
  const std::vector<std::string> all = all_gather_strings(world, to_json(rank_profile(recorder)));
  if (!reporter) return;
  std::vector<RankProfile> ranks;
  for (const std::string& text : all) ranks.push_back(rank_profile_from_json(text));
  reporter->note(
      profile_table(ranks, config.model->training_flops(
                               static_cast<double>(config.batch * config.seq), config.seq)));
}

// What validation does, for the console and the report ("" without validation).
std::string validation_summary(const TrainConfig& config, const Trainer& trainer) {
  if (!config.validates()) return "";
  return detail::concat("every ", config.val_every,
                        " steps and after the last: the mean loss over ", config.val_batches,
                        config.val_batches == 1 ? " batch of " : " batches of ", config.batch,
                        " x ", config.seq, " tokens from ", trainer.validation_source());
}

// --report: rank 0 draws the run's metrics file into report_dir/index.html (docs/report.md).
void write_report(const TrainConfig& config, Trainer& trainer, const std::string& sample,
                  TrainReporter& reporter) {
  const std::string metrics = config.metrics_file();
  if (!std::filesystem::exists(metrics)) {  // a resumed run with no step left, and no file
    reporter.note("no report: the metrics file '" + metrics + "' holds no steps");
    return;
  }
  RunInfo info;
  info.title = "meshtrain: " + config.model->describe();
  info.settings = {
      {"model", detail::concat(config.model->describe(), ", ", config.model->num_parameters(),
                               " parameters")},
      {"mesh",
       detail::concat(trainer.mesh().layout().to_string(), " (", config.world, " rank",
                      config.world > 1 ? "s" : "", ", ", backend_name(config.backend), " backend, ",
                      config.device == DeviceKind::cuda ? "CUDA" : "CPU", ")")},
      {"plan", trainer.plan().describe()},
      {"training", detail::concat(config.steps, " steps of ", config.batch, " x ", config.seq,
                                  " tokens, ", config.grad_accum, " micro-batch",
                                  config.grad_accum > 1 ? "es" : "", ", lr ", config.lr.lr)},
  };
  if (config.validates())
    info.settings.push_back({"validation", validation_summary(config, trainer)});
  info.config_text = config.report_config;
  info.sample = sample;
  reporter.note("report " + write_run_report(metrics, config.report_dir, info));
}

// The steps and what follows them; `recorder` is set when tracing or profiling.
std::vector<StepMetrics> train_steps(const TrainConfig& config, Communicator& world,
                                     MemoryTracker& memory, TrainReporter* reporter,
                                     const std::optional<InjectedFault>& fault,
                                     trace::Recorder* recorder) {
  Trainer trainer(config, world, memory);
  // The metrics file may lie in the report's folder, opened at the first step.
  if (reporter && !config.report_dir.empty()) create_directories_synced(config.report_dir);
  if (reporter)
    reporter->start(trainer.mesh().layout().to_string(), trainer.plan().describe(),
                    config.model->num_parameters());
  if (reporter && config.validates())
    reporter->note("          validation " + validation_summary(config, trainer));
  if (reporter && !trainer.resumed_from().empty())
    reporter->resumed(trainer.resumed_from(), trainer.steps_done());
  std::vector<StepMetrics> steps;
  while (trainer.steps_done() < config.steps) {
    if (fault) fault->maybe_fire(world.rank(), trainer.steps_done() + 1);
    {
      const trace::Counting counting(recorder);  // the profile covers the steps only
      steps.push_back(trainer.step());
    }
    const int64_t done = trainer.steps_done();
    if (config.validates() && (done % config.val_every == 0 || done == config.steps))
      steps.back().val_loss = trainer.validate();
    if (reporter) reporter->on_step(steps.back());
    const bool due = config.checkpoint_every > 0 && done % config.checkpoint_every == 0;
    if (!config.checkpoint_dir.empty() && (due || done == config.steps)) {
      const std::string path = trainer.save_checkpoint();
      if (reporter) reporter->note("checkpoint " + path);
    }
  }
  if (config.profile) report_profile(config, world, *recorder, reporter);
  if (!config.save_path.empty()) trainer.save(config.save_path);
  if (reporter) reporter->finish();
  std::string sample;
  if (config.sample_bytes > 0 && config.model->vocab() != 256 && reporter)
    reporter->note("no sample: sampling text needs a byte-level model (vocab 256), this one has "
                   "vocab " + std::to_string(config.model->vocab()) + " (--sample 0: none)");
  if (config.sample_bytes > 0 && config.model->vocab() == 256) {
    std::function<void(int32_t)> print;
    if (reporter)
      print = [reporter](int32_t byte) { reporter->sample_byte(static_cast<char>(byte)); };
    sample = trainer.sample(config.sample_bytes, config.seed, print);  // on rank 0
    if (reporter) reporter->end_sample();
    if (sample.empty() && reporter)
      reporter->note("no sample: the " + config.model->family() + " family has no decoder");
  }
  if (reporter && !config.report_dir.empty()) write_report(config, trainer, sample, *reporter);
  return steps;
}

// One rank's whole run; `reporter` is set on rank 0 only.
std::vector<StepMetrics> train_rank(const TrainConfig& config, Communicator& world,
                                    MemoryTracker& memory, TrainReporter* reporter,
                                    const std::optional<InjectedFault>& fault) {
  ops::cpu::set_cpu_threads(config.threads_per_rank());  // per-thread settings: this rank's
  ops::cpu::set_cpu_part_timeout(comm_options(config).timeout);
  // One run per checkpoint folder: a second would publish over the first's steps. Rank 0 writes
  // the folder's shared files, so it holds the lock, before the trainer looks at the folder.
  std::optional<CheckpointDirectoryLock> lock;
  if (world.rank() == 0 && !config.checkpoint_dir.empty()) lock.emplace(config.checkpoint_dir);
  // Tracing (docs/tracing.md): a recorder bound to this rank's thread for the whole run; the
  // trace is written at the end, and also when the run fails.
  std::shared_ptr<trace::Recorder> recorder;
  if (!config.trace_dir.empty() || config.profile) {
    recorder = std::make_shared<trace::Recorder>(
        world.rank(), trace::RecorderOptions{.keep_spans = !config.trace_dir.empty()});
    recorder->set_counting(false);  // trace::Counting turns it on for each step
  }
  const trace::Bind bind(recorder.get());
  const auto write_trace = [&] {
    if (config.trace_dir.empty()) return;
    std::filesystem::create_directories(config.trace_dir);
    write_chrome_trace(*recorder, config.trace_dir,
                       {{"world", std::to_string(world.size())},
                        {"mesh", config.effective_mesh().to_string()},
                        {"backend", std::string(backend_name(config.backend))},
                        {"model", config.model->describe()}});
  };
  try {
    std::vector<StepMetrics> steps = train_steps(config, world, memory, reporter, fault,
                                                 recorder.get());
    write_trace();
    return steps;
  } catch (...) {
    try {
      write_trace();  // what the failed run recorded, for its post-mortem
    } catch (...) {
    }
    throw;
  }
}

}  // namespace

std::vector<StepMetrics> run_training(const TrainConfig& config, std::ostream& out,
                                      bool interactive) {
  config.validate();
  MT_CHECK(!config.dry_run(),
           "run_training trains; a configuration on shape-only tensors "
           "(device meta) is a dry run: call dry_run(config) (meshtrain/train/dry_run.h)");
  // With --report and no --metrics, the metrics go to the report's folder, which rank 0 creates
  // before the first step (the trainers check the configuration as given).
  TrainConfig reporting = config;
  reporting.metrics_path = config.metrics_file();
  const std::optional<InjectedFault> fault = injected_fault_from_env();
  switch (config.backend) {
    case BackendKind::local: {
      // A failing rank aborts the world: the others wake at once and the first error is rethrown.
      TrainReporter reporter(reporting, out, interactive);
      std::vector<StepMetrics> steps;
      spawn_ranks(
          config.world,
          [&](RankContext& ctx) {
            auto mine = train_rank(config, ctx.world, ctx.memory,
                                   ctx.rank == 0 ? &reporter : nullptr, fault);
            if (ctx.rank == 0) steps = std::move(mine);
          },
          comm_options(config));
      return steps;
    }
    case BackendKind::mpi: {
#if MESHTRAIN_HAS_MPI
      MemoryTracker memory;  // outlives the communicator and every tensor it may hold
      MemoryScope scope(&memory);
      std::unique_ptr<Communicator> world = mpi_world(comm_options(config));
      const std::unique_ptr<Communicator> watch = mpi_world(comm_options(config));
      // Any error on a rank ends the whole job (MPI_Abort), reported once: its peers would
      // otherwise wait out their timeouts, and a stopped peer could block MPI_Finalize for ever.
      try {
        MT_CHECK(world->size() == config.world,
                 "--world must match the number of mpirun processes: got --world ", config.world,
                 " under ", world->size(), " processes");
        std::optional<TrainReporter> reporter;
        if (world->rank() == 0) reporter.emplace(reporting, out, interactive);
        auto steps = train_rank(config, *world, memory, reporter ? &*reporter : nullptr, fault);
        return world->rank() == 0 ? steps : std::vector<StepMetrics>{};
      } catch (const std::exception& e) {
        end_mpi_job(e, *watch, report_grace(comm_options(config).timeout));
      }
#else
      throw NotSupported("--backend mpi: this build of meshtrain has no MPI support");
#endif
    }
    case BackendKind::nccl: {
#if MESHTRAIN_HAS_NCCL
      // One process per GPU: alone, or one of mpirun's (which only starts the processes here;
      // they meet through a file store in a directory they share).
      const int rank = mpirun_rank().value_or(0), processes = mpirun_processes().value_or(1);
      MT_CHECK(processes == config.world,
               "--world must match the number of processes (mpirun -np) on the nccl backend: "
               "got --world ", config.world, " under ", processes, " processes");
      const char* shared = std::getenv("MESHTRAIN_STORE");
      MT_CHECK(shared || processes == 1, "--backend nccl with ", processes,
               " processes: set MESHTRAIN_STORE to a new, empty directory every process can "
               "reach (the processes exchange NCCL's id through it)");
      const std::filesystem::path store_dir =
          shared ? std::filesystem::path(shared)
                 : std::filesystem::temp_directory_path() /
                       ("meshtrain-nccl-" + std::to_string(::getpid()));
      MemoryTracker memory;  // outlives the communicator and every tensor it may hold
      MemoryScope scope(&memory);
      const Device device = config.rank_device(mpirun_local_rank().value_or(0));
      std::unique_ptr<Communicator> world;
      // The store serves the bootstrap only: a private one goes as soon as it is done with.
      try {
        FileStore store(store_dir);
        world = nccl_world(store, rank, processes, device.index, comm_options(config));
      } catch (...) {
        if (!shared) std::filesystem::remove_all(store_dir);
        throw;
      }
      if (!shared) std::filesystem::remove_all(store_dir);
      std::optional<TrainReporter> reporter;
      if (rank == 0) reporter.emplace(reporting, out, interactive);
      auto steps = train_rank(config, *world, memory, reporter ? &*reporter : nullptr, fault);
      return rank == 0 ? steps : std::vector<StepMetrics>{};
#else
      throw NotSupported("--backend nccl: this build of meshtrain has no NCCL support");
#endif
    }
  }
  throw InvalidArgument("unknown backend");
}

}  // namespace meshtrain

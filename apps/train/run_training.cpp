#include "apps/train/run_training.h"

#include <chrono>
#include <optional>

#include "apps/train/fault_injection.h"
#include "apps/train/job_error.h"
#include "apps/train/reporter.h"
#include "apps/train/trainer.h"
#include "core/comm/local/spawn_ranks.h"
#include "core/ops/cpu/cpu_threads.h"
#include "core/error.h"
#include "meshtrain/config.h"

#if MESHTRAIN_HAS_MPI
#include "core/comm/mpi/mpi_world.h"
#endif

namespace meshtrain {

namespace {

CommOptions comm_options(const TrainConfig& config) {
  return CommOptions{std::chrono::seconds(config.timeout_s)};
}

// One rank's whole run; `reporter` is set on rank 0 only.
std::vector<StepMetrics> train_rank(const TrainConfig& config, Communicator& world,
                                    MemoryTracker& memory, TrainReporter* reporter,
                                    const std::optional<InjectedFault>& fault) {
  ops::cpu::set_cpu_threads(config.threads_per_rank());  // per rank thread (OpenMP's count)
  Trainer trainer(config, world, memory);
  if (reporter)
    reporter->start(trainer.mesh().layout().to_string(), trainer.plan().describe(),
                    trainer.model().config().num_parameters());
  if (reporter && !trainer.resumed_from().empty())
    reporter->note("resumed from " + trainer.resumed_from() + " at step " +
                   std::to_string(trainer.steps_done()));
  std::vector<StepMetrics> steps;
  while (trainer.steps_done() < config.steps) {
    if (fault) fault->maybe_fire(world.rank(), trainer.steps_done() + 1);
    steps.push_back(trainer.step());
    if (reporter) reporter->on_step(steps.back());
    const int64_t done = trainer.steps_done();
    const bool due = config.checkpoint_every > 0 && done % config.checkpoint_every == 0;
    if (!config.checkpoint_dir.empty() && (due || done == config.steps)) {
      const std::string path = trainer.save_checkpoint();
      if (reporter) reporter->note("checkpoint " + path);
    }
  }
  if (!config.save_path.empty()) trainer.save(config.save_path);
  std::string sample;
  if (config.sample_bytes > 0 && config.model.vocab == 256)
    sample = trainer.sample(config.sample_bytes, config.seed);
  if (reporter) reporter->finish(sample);
  return steps;
}

}  // namespace

std::vector<StepMetrics> run_training(const TrainConfig& config, std::ostream& out,
                                      bool interactive) {
  config.validate();
  const std::optional<InjectedFault> fault = injected_fault_from_env();
  switch (config.backend) {
    case BackendKind::local: {
      // A failing rank aborts the world: the others wake at once and the first error is rethrown.
      TrainReporter reporter(config, out, interactive);
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
      MT_CHECK_EQ(world->size(), config.world, "--world must match the number of mpirun processes");
      // Any error on a rank ends the whole job (MPI_Abort), reported once: its peers would
      // otherwise wait out their timeouts, and a stopped peer could block MPI_Finalize for ever.
      try {
        std::optional<TrainReporter> reporter;
        if (world->rank() == 0) reporter.emplace(config, out, interactive);
        auto steps = train_rank(config, *world, memory, reporter ? &*reporter : nullptr, fault);
        return world->rank() == 0 ? steps : std::vector<StepMetrics>{};
      } catch (const std::exception& e) {
        end_mpi_job(e, *watch, report_grace(comm_options(config).timeout));
      }
#else
      throw NotSupported("--backend mpi: this build of meshtrain has no MPI support");
#endif
    }
    case BackendKind::nccl:
      throw NotSupported(
          "--backend nccl: training on GPUs is not wired into the trainer yet; the nccl "
          "communicator itself is available to C++ programs (core/comm/nccl)");
  }
  throw InvalidArgument("unknown backend");
}

}  // namespace meshtrain

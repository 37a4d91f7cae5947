#include "tests/apps_mpi/mpi_runs.h"

#include <memory>

#include "meshtrain/core/comm/mpi/mpi_world.h"
#include "tests/comm_mpi/mpi_test_env.h"

namespace meshtrain::testing {

RunResult train_on_mpi(const TrainConfig& config) {
  MemoryTracker memory;  // outlives the communicator and every tensor it holds
  MemoryScope scope(&memory);
  const std::unique_ptr<Communicator> world = mpi_world(mpi_test::test_options());
  Trainer trainer(config, *world, memory);
  RunResult result;
  for (int64_t s = 0; s < config.steps; ++s) {
    const StepMetrics m = trainer.step();
    result.losses.push_back(m.loss);
    result.grad_norms.push_back(m.grad_norm);
  }
  trainer.gather_parameters([&](const Parameter& p, const Tensor& value) {
    result.params[p.name()] = value.to_vector();
  });
  return result;
}

RunResult reference_seen_here(const RunResult& reference) {
  if (mpi_test::harness_comm().rank() == 0) return reference;
  return RunResult{reference.losses, reference.grad_norms, {}, {}};
}

}  // namespace meshtrain::testing

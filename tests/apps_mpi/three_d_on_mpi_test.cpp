// The full 3D layout under mpirun -np 8 on the mpi backend: pipeline (1F1B over 2 stages) x FSDP
// (dp_shard=2) x tensor parallelism with sequence parallelism (tp=2), with clipping, reproduces
// the single-rank run of the same model step by step (each step's loss and gradient norm within
// 1e-5 relative, the final parameters within 1e-5 on pp rank 0, which gathers every stage's).
#include <memory>

#include <gtest/gtest.h>

#include "core/comm/mpi/mpi_world.h"
#include "mesh/axis_names.h"
#include "tests/comm_mpi/mpi_test_env.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ThreeDOnMpi = mpi_test::MpiTest;

TEST_F(ThreeDOnMpi, MatchesTheSingleRankRun) {
  ASSERT_EQ(world().size(), 8) << "run with mpirun -np 8";
  TrainConfig c = uneven_config();
  c.backend = BackendKind::mpi;
  c.world = 8;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.grad_accum = 2;
  c.clip = 0.25f;
  c.set("pp", "schedule", "1f1b").set("fsdp", "mode", "full").set("tp", "sequence_parallel", "true");

  MemoryTracker memory;  // outlives the communicator and every tensor it holds
  MemoryScope scope(&memory);
  const std::unique_ptr<Communicator> mpi = mpi_world(mpi_test::test_options());
  Trainer trainer(c, *mpi, memory);
  RunResult got;
  for (int64_t s = 0; s < c.steps; ++s) {
    const StepMetrics m = trainer.step();
    got.losses.push_back(m.loss);
    got.grad_norms.push_back(m.grad_norm);
  }
  std::map<std::string, std::vector<float>> params;
  trainer.for_each_global_param([&](const Parameter& p, const Tensor& value) {
    params[p.name()] = value.to_vector();
  });
  const RunResult& want = uneven_reference(c.clip);
  if (trainer.mesh().axis_rank(mesh_axis::pp) != 0) {  // holds its own stage's parameters only
    expect_same_run(got, RunResult{want.losses, want.grad_norms, {}, {}});
    return;
  }
  got.params = std::move(params);
  expect_same_run(got, want);
}

}  // namespace
}  // namespace meshtrain::testing

// Tensor parallelism under mpirun -np 4 on the mpi backend: FSDP x TP (dp_shard=2,tp=2), with and
// without sequence parallelism, reproduces the single-rank run of the same model step by step
// (each step's loss and gradient norm within 1e-5 relative, the final parameters within 1e-5).
// Every rank computes the single-rank reference itself (tiny model) and checks its own view.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "meshtrain/train/run_training.h"
#include "tests/apps_mpi/mpi_runs.h"
#include "tests/comm_mpi/mpi_test_env.h"

namespace meshtrain::testing {
namespace {

TrainConfig tp_config(bool sequence_parallel) {
  TrainConfig c = uneven_config();
  c.backend = BackendKind::mpi;
  c.world = 4;
  c.mesh = parse_mesh_spec("dp_shard=2,tp=2");
  c.set("fsdp", "mode", "full");
  c.set("tp", "sequence_parallel", sequence_parallel ? "true" : "false");
  return c;
}

class TpOnMpi : public mpi_test::MpiTest, public ::testing::WithParamInterface<bool> {};

TEST_P(TpOnMpi, MatchesTheSingleRankRun) {
  ASSERT_EQ(world().size(), 4) << "run with mpirun -np 4";
  expect_same_run(train_on_mpi(tp_config(GetParam())), reference_seen_here(uneven_reference(0.f)));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpOnMpi, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "fsdp2_tp2_sp" : "fsdp2_tp2");
                         });

// The same through run_training, as `meshtrain train --backend mpi` runs it: rank 0 reports the
// steps, the other ranks train and report nothing.
using RunTrainingOnMpi = mpi_test::MpiTest;

TEST_F(RunTrainingOnMpi, RankZeroReportsTheSingleRankSteps) {
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(tp_config(true), out, false);
  if (world().rank() != 0) {
    EXPECT_TRUE(steps.empty());
    return;
  }
  RunResult got;
  for (const StepMetrics& m : steps) {
    got.losses.push_back(m.loss);
    got.grad_norms.push_back(m.grad_norm);
  }
  const RunResult& reference = uneven_reference(0.f);
  expect_same_run(got, RunResult{reference.losses, reference.grad_norms, {}, {}});
}

}  // namespace
}  // namespace meshtrain::testing

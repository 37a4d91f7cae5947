// The full 3D layout under mpirun -np 8 on the mpi backend: pipeline (1F1B over 2 stages) x FSDP
// (dp_shard=2) x tensor parallelism with sequence parallelism (tp=2), with clipping, reproduces
// the single-rank run of the same model step by step (each step's loss and gradient norm within
// 1e-5 relative, the final parameters within 1e-5 on rank 0, which gathers every slice), for
// GPT-2 and for Llama 3 (grouped-query attention: its key/value heads split over tp).
#include <gtest/gtest.h>

#include "meshtrain/models/llama_family.h"
#include "tests/apps_mpi/mpi_runs.h"
#include "tests/comm_mpi/mpi_test_env.h"

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
  c.set("pp", "schedule", "1f1b").set("fsdp", "mode", "full");
  c.set("tp", "sequence_parallel", "true");

  expect_same_run(train_on_mpi(c), reference_seen_here(uneven_reference(c.clip)));
}

TEST_F(ThreeDOnMpi, LlamaMatchesTheSingleRankRun) {
  ASSERT_EQ(world().size(), 8) << "run with mpirun -np 8";
  TrainConfig c = uneven_config();
  c.model = llama_model(uneven_llama(2, /*tied=*/false));
  c.clip = 0.25f;
  const RunResult reference = run_reference(c);

  c.backend = BackendKind::mpi;
  c.world = 8;
  c.mesh = parse_mesh_spec("pp=2,dp_shard=2,tp=2");
  c.grad_accum = 2;
  c.set("pp", "schedule", "1f1b").set("fsdp", "mode", "full");
  c.set("tp", "sequence_parallel", "true");
  expect_same_run(train_on_mpi(c), reference_seen_here(reference));
}

}  // namespace
}  // namespace meshtrain::testing

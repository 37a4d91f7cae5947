// A training run on the mpi backend inside an mpirun job, seen from this rank.
#pragma once

#include "tests/support/training_runs.h"

namespace meshtrain::testing {

// Trains `config` (backend mpi, world = the job's size) on a world communicator of the job and
// returns each step's loss and gradient norm, and on rank 0 the global parameters (gathered there).
RunResult train_on_mpi(const TrainConfig& config);
// What this rank of the job should see of the reference run: all of it on rank 0, the losses and
// gradient norms elsewhere.
RunResult reference_seen_here(const RunResult& reference);

}  // namespace meshtrain::testing

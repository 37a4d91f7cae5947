// A training run on the mpi backend inside an mpirun job, seen from this rank.
#pragma once

#include "tests/support/training_runs.h"

namespace meshtrain::testing {

// Trains `config` (backend mpi, world = the job's size) on a world communicator of the job and
// returns each step's loss and gradient norm and the global parameters this rank sees (every
// parameter on pp rank 0, its own stage's elsewhere).
RunResult train_on_mpi(const TrainConfig& config);

}  // namespace meshtrain::testing

// Runs a whole training run on the configured backend: local (ranks as threads of this process)
// or mpi (this process is one rank of an mpirun job). Rank 0 reports; every rank trains.
#pragma once

#include <iosfwd>
#include <vector>

#include "meshtrain/train/step_metrics.h"
#include "meshtrain/train/train_config.h"

namespace meshtrain {

// Returns every step's metrics (as rank 0 saw them; empty on other mpi ranks).
std::vector<StepMetrics> run_training(const TrainConfig& config, std::ostream& out,
                                      bool interactive);

}  // namespace meshtrain

// What the launcher (mpirun) tells a process about its job, read from its environment before MPI
// starts: whether it is one of several processes, which, and how many share this machine.
#pragma once

#include <optional>

namespace meshtrain {

// The job's process count and this process's rank (nullopt outside an mpirun job).
std::optional<int> mpirun_processes();
std::optional<int> mpirun_rank();
// How many of the job's processes run on this machine, and which of them this one is (nullopt
// outside an mpirun job).
std::optional<int> mpirun_local_processes();
std::optional<int> mpirun_local_rank();


}  // namespace meshtrain

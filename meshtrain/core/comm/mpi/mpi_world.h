// The mpi backend: one process per rank (started with mpirun), collectives on host tensors.
//
// Failure across processes: a rank whose error escapes should end the whole job with mpi_abort()
// from its top-level handler. Otherwise the other ranks only learn of it when their own waits time
// out (CommOptions::timeout), which ends them too, but later.
#pragma once

#include <memory>
#include <string_view>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain {

// The world communicator of this process. The first call initialises MPI (with
// MPI_THREAD_MULTIPLE, as every communicator's progress thread calls MPI); MPI is finalised once the
// last communicator is destroyed and the process exits. Each call returns an independent
// communicator (its own MPI context) over all ranks, named "world".
std::unique_ptr<Communicator> mpi_world(CommOptions options = {});

// Prints "meshtrain: rank R: <message>" to stderr and ends every rank of the job (MPI_Abort).
[[noreturn]] void mpi_abort(std::string_view message, int code = 1);

}  // namespace meshtrain

#include "meshtrain/core/comm/mpi/mpi_world.h"

#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "meshtrain/core/comm/mpi/mpi_communicator.h"
#include "meshtrain/core/comm/mpi/mpi_runtime.h"

namespace meshtrain {

std::unique_ptr<Communicator> mpi_world(CommOptions options) {
  auto runtime = MpiRuntime::acquire();
  // A private context, so that the ops of two world communicators never match each other.
  MPI_Comm comm;
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int size = 0;
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<int> world_ranks(size);
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  return std::make_unique<MpiCommunicator>(std::move(runtime), comm, std::move(world_ranks), "world",
                                           options);
}

void mpi_abort(std::string_view message, int code) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool running = initialized && !finalized;
  int rank = -1;
  if (running) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "meshtrain: rank %d: %.*s\n", rank, static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
  if (running) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI not running: this process is the whole job
}

}  // namespace meshtrain

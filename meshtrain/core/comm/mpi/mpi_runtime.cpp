#include "meshtrain/core/comm/mpi/mpi_runtime.h"

#include <mutex>
#include <string>

#include "meshtrain/core/error.h"

namespace meshtrain {

std::shared_ptr<MpiRuntime> MpiRuntime::acquire() {
  static std::mutex mutex;
  // Held until static destruction, so that MPI is finalised at exit rather than between two
  // communicators' lifetimes (MPI cannot be initialised twice in one process).
  static std::shared_ptr<MpiRuntime> instance;
  std::lock_guard lock(mutex);
  if (instance) return instance;

  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) throw CommError("MPI was already finalised in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  }
  // Collectives progress on one thread per communicator while the caller may split or issue more.
  if (provided < MPI_THREAD_MULTIPLE)
    throw CommError(detail::concat("the mpi backend needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
                                   ") but this MPI provides thread level ", provided));
  instance.reset(new MpiRuntime(!initialized));
  return instance;
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

void mpi_check(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw CommError(detail::concat(call, " failed: ", std::string(text, length)));
}

}  // namespace meshtrain

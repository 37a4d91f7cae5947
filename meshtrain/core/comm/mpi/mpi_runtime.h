// MPI's process-wide state: initialised once per process and finalised after its last user.
#pragma once

#include <memory>
#include <string_view>

#include <mpi.h>

namespace meshtrain {

class MpiRuntime {
 public:
  // Initialises MPI on first use. Throws CommError when MPI lacks MPI_THREAD_MULTIPLE or was
  // already finalised.
  static std::shared_ptr<MpiRuntime> acquire();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  explicit MpiRuntime(bool owns) : owns_(owns) {}
  bool owns_;  // false when someone else initialised MPI (then they finalise it)
};

// Throws CommError naming the call and MPI's message unless rc is MPI_SUCCESS.
void mpi_check(int rc, std::string_view call);

}  // namespace meshtrain

#include "meshtrain/train/launcher.h"

#include <cstdlib>

#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

namespace {
std::optional<int> first_integer(const char* open_mpi, const char* pmi) {
  const char* text = std::getenv(open_mpi);
  if (!text) text = std::getenv(pmi);
  return text ? parse_integer<int>(text) : std::nullopt;
}
}  // namespace

std::optional<int> mpirun_processes() { return first_integer("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"); }
std::optional<int> mpirun_rank() { return first_integer("OMPI_COMM_WORLD_RANK", "PMI_RANK"); }
std::optional<int> mpirun_local_processes() {
  return first_integer("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS");
}
std::optional<int> mpirun_local_rank() {
  return first_integer("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID");
}

}  // namespace meshtrain

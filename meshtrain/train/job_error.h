// How an error ends an mpirun job, reported once (docs/failures.md).
//
// Rank 0 reports at once and ends the job (MPI_Abort): an error every rank meets alike (a refused
// input, a checkpoint the ranks agreed failed) so reads once. Any other rank first gives rank 0 a
// grace period to do that, and reports only if it is still running then: its error was its own.
// After a collective timeout, the waiting ranks tell rank 0 they are alive, so that its report
// names the ranks that never did (stopped, hung or dead); if rank 0 is the one lost, rank 1
// reports, and each later rank waits one grace more (up to 8), so that rank 1's abort ends it
// before it speaks.
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/config.h"

namespace meshtrain {

// How long rank 0 listens for the waiting ranks after a timeout: a quarter of the collective
// timeout, at most 1 s. Other ranks give rank 0 twice that, so they report only when rank 0 could
// not, and before a peer's own timeout.
std::chrono::milliseconds report_grace(std::chrono::milliseconds timeout);

// Before MPI is up (flags, files): a rank other than 0 waits the grace before printing, as its
// error is most likely rank 0's too; returns at once elsewhere.
void let_rank_zero_report_first();

#if MESHTRAIN_HAS_MPI
// Ends the job for `error` on this rank; `watch` is a world communicator kept for this alone.
[[noreturn]] void end_mpi_job(const std::exception& error, Communicator& watch,
                              std::chrono::milliseconds grace);
#endif

}  // namespace meshtrain

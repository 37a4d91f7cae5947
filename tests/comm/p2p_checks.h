// Point-to-point patterns of a pipeline, checked against closed-form values on any backend: every
// rank posts its receives before its sends and only then waits, which deadlocks a backend whose
// receive holds up the ops issued after it. Each function is called by every rank of `comm`;
// buffers live on comm.exchange_device(), so the same checks run on host and GPU backends.
#pragma once

#include <cstdint>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain::testing {

// How a check issues its transfers, receives first either way.
enum class P2PIssue {
  separate,  // one send() or recv() call per transfer, no wait in between
  batched,   // all of a rank's transfers in one batch_p2p()
};

// Rank r receives from r-1 before it sends to r+1, around a ring (at W = 2 both neighbours are
// the same rank, so the two ranks exchange).
void check_recv_first_ring(Communicator& comm, int64_t count, DType dtype, P2PIssue issue);
// Ranks 2k and 2k+1 exchange two messages each way, each posting both receives first; with an odd
// world size the last rank sits out.
void check_recv_first_pairs(Communicator& comm, int64_t count, DType dtype, P2PIssue issue);
// One step of every stage of a pipeline (a line, not a ring): receive two activations from the
// stage before and a gradient from the stage after, then send two activations forward and a
// gradient back. Activations hold `count` elements and gradients count + 3, so that a crossed
// match shows as a size mismatch.
void check_pipeline_step(Communicator& comm, int64_t count, DType dtype, P2PIssue issue);

}  // namespace meshtrain::testing

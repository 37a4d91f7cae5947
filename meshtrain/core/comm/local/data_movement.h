// Each rank's share of a collective's data movement, read straight from the peers' posted buffers
// (staged only to reduce a source that sits on another device, or into a host output). Called
// between the phases of a slot, when every rank has posted: by each rank for its own share, or by
// the last rank to arrive for every rank's, phase by phase (op_signature.h: last_rank_moves).
#pragma once

#include "meshtrain/core/comm/local/group_state.h"

namespace meshtrain::local {

// The GPU a collective moves data on, when one of its buffers is there (an offloaded host
// buffer crosses to the other's GPU); meta for shape-only buffers (nothing moves); the host
// otherwise, and for a barrier.
Device device_of(const Tensor& in, const Tensor& out);

// out chunk j <- in of rank j.
void gather_from_peers(const Slot& slot, int rank);
// out <- reduction of chunk `rank` of every rank's in.
void reduce_my_chunk(const Slot& slot, int rank);
// All-reduce, phase 1: chunk `rank` of my buffer <- its reduction across every rank's buffer.
void all_reduce_reduce_phase(const Slot& slot, int rank);
// All-reduce, phase 2: every other chunk c of my buffer <- chunk c of rank c's (reduced) buffer.
void all_reduce_gather_phase(const Slot& slot, int rank);
// buffer <- root's buffer (the root copies nothing).
void copy_from_root(const Slot& slot, int rank);
// out chunk j <- chunk `rank` of rank j's in.
void exchange_chunks(const Slot& slot, int rank);

}  // namespace meshtrain::local

// spawn_ranks: runs one function as N ranks on N threads of a LocalWorld. The trainer and every
// test use it.
#pragma once

#include <functional>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/core/memory.h"

namespace meshtrain {

struct RankContext {
  int rank;
  int world_size;
  Communicator& world;
  MemoryTracker& memory;  // bound to the rank's thread for the whole of fn
};

// Runs fn(ctx) for every rank on its own thread, each with its own MemoryTracker. When a rank
// throws, the world is aborted so that the others wake; once all have joined, the first root-cause
// failure is rethrown (not the secondary "rank R failed" errors it caused elsewhere). The ranks
// split the caller's CPU threads (ops::cpu::cpu_threads; at least one each), so that they do not
// oversubscribe the cores.
void spawn_ranks(int world_size, const std::function<void(RankContext&)>& fn,
                 CommOptions options = {});

}  // namespace meshtrain

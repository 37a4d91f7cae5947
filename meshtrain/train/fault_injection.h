// Fault injection for the failure tests (docs/failures.md): MESHTRAIN_FAULT="RANK:STEP:ACTION"
// makes world rank RANK, just before step STEP (counted from 1), raise an error ("raise"), kill
// itself (SIGKILL, "kill"), stop itself (SIGSTOP, "stop") or find its disk full ("full": from then
// on its writes past 64 KiB fail, as RLIMIT_FSIZE makes them; a limit set from outside, with
// ulimit, would break mpirun's own files), so that tests drive the real binary into each failure.
// Unset, nothing happens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meshtrain {

struct InjectedFault {
  enum class Action { raise, kill, stop, full };
  int rank = 0;
  int64_t step = 0;
  Action action = Action::raise;

  // Fires when this is the rank and the step.
  void maybe_fire(int world_rank, int64_t step_number) const;
};

// The fault MESHTRAIN_FAULT asks for; InvalidArgument for a malformed value.
std::optional<InjectedFault> injected_fault_from_env();
std::optional<InjectedFault> parse_injected_fault(const std::string& text);

}  // namespace meshtrain

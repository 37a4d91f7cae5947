#include "meshtrain/train/fault_injection.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

void InjectedFault::maybe_fire(int world_rank, int64_t step_number) const {
  if (world_rank != rank || step_number != step) return;
  switch (action) {
    case Action::raise:
      throw Error(detail::concat("injected fault (MESHTRAIN_FAULT) on rank ", rank, " before step ",
                                 step));
    case Action::kill: std::raise(SIGKILL); break;
    case Action::stop: std::raise(SIGSTOP); break;
    case Action::full: {
      const rlimit limit{64 << 10, 64 << 10};
      MT_CHECK(setrlimit(RLIMIT_FSIZE, &limit) == 0, "MESHTRAIN_FAULT: setrlimit failed");
      break;
    }
  }
}

std::optional<InjectedFault> parse_injected_fault(const std::string& text) {
  const size_t first = text.find(':'), second = text.find(':', first + 1);
  const auto bad = [&] {
    return InvalidArgument(detail::concat("MESHTRAIN_FAULT '", text,
                                          "': expected RANK:STEP:ACTION with ACTION raise, kill, "
                                          "stop or full, e.g. 1:3:raise"));
  };
  if (first == std::string::npos || second == std::string::npos) throw bad();
  const auto rank = parse_integer<int>(text.substr(0, first));
  const auto step = parse_integer<int64_t>(text.substr(first + 1, second - first - 1));
  const std::string action = text.substr(second + 1);
  if (!rank || !step || *rank < 0 || *step < 1) throw bad();
  InjectedFault fault{*rank, *step, InjectedFault::Action::raise};
  if (action == "kill")
    fault.action = InjectedFault::Action::kill;
  else if (action == "stop")
    fault.action = InjectedFault::Action::stop;
  else if (action == "full")
    fault.action = InjectedFault::Action::full;
  else if (action != "raise")
    throw bad();
  return fault;
}

std::optional<InjectedFault> injected_fault_from_env() {
  const char* value = std::getenv("MESHTRAIN_FAULT");
  if (!value || !*value) return std::nullopt;
  return parse_injected_fault(value);
}

}  // namespace meshtrain

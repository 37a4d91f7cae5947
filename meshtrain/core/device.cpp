#include "meshtrain/core/device.h"


#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

std::string to_string(const Device& device) {
  switch (device.kind) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::cuda:
      return "cuda:" + std::to_string(device.index);
    case DeviceKind::meta:
      return "meta";
  }
  return "unknown device";
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "meta") return Device::meta();
  constexpr std::string_view prefix = "cuda:";
  if (text.substr(0, prefix.size()) == prefix) {
    const std::optional<int> index = parse_integer<int>(text.substr(prefix.size()));
    if (index && *index >= 0) return Device::cuda(*index);
  }
  throw InvalidArgument(
      detail::concat("bad device '", text, "', expected 'cpu', 'cuda:N' or 'meta'"));
}

}  // namespace meshtrain

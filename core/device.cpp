#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace meshtrain {

std::string to_string(const Device& device) {
  return device.is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(device.index);
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  constexpr std::string_view prefix = "cuda:";
  if (text.substr(0, prefix.size()) == prefix) {
    int index = -1;
    const char* begin = text.data() + prefix.size();
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && begin != end && index >= 0) return Device::cuda(index);
  }
  throw InvalidArgument(detail::concat("bad device '", text, "', expected 'cpu' or 'cuda:N'"));
}

}  // namespace meshtrain

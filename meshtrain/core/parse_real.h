// The one strict real-number parser for options and config values: the whole text as a finite
// decimal number (from_chars, so a subnormal such as 1e-310 reads as itself, where std::stod
// throws), or nothing.
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

namespace meshtrain {

inline std::optional<double> parse_real(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value))
    return std::nullopt;
  return value;
}

}  // namespace meshtrain

// The one strict integer parser for flags, options and text formats: the whole text as a decimal
// integer that fits the type (an optional '-', no spaces, nothing after the digits), or nothing.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace meshtrain {

template <typename T>
std::optional<T> parse_integer(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

}  // namespace meshtrain

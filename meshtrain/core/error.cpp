#include "meshtrain/core/error.h"

#include <cstring>

namespace meshtrain::detail {

void throw_invalid_argument(const std::string& message) { throw InvalidArgument(message); }

void throw_internal_error(const char* file, int line, const char* condition,
                          const std::string& values, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw InternalError(concat("internal error (a bug in meshtrain; please report it): ", message,
                             " [check failed: ", condition, values.empty() ? "" : " ", values,
                             " at ", base ? base + 1 : file, ":", line, "]"));
}

}  // namespace meshtrain::detail

#include "meshtrain/core/error.h"

#include <cstring>

namespace meshtrain::detail {

void throw_check_failure(const char* file, int line, const std::string& what,
                         const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw InvalidArgument(concat(message, " [check failed: ", what, " at ", base ? base + 1 : file,
                               ":", line, "]"));
}

}  // namespace meshtrain::detail

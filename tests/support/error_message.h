// The message of the exception a callable throws, so tests can compare it exactly.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace meshtrain::testing {

template <typename Exception = std::exception, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace meshtrain::testing

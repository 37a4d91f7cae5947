// Test helpers for errors: the message of the exception a callable throws, so tests can compare
// it exactly, and expect_error, which checks the exception type and fragments of its message.
#pragma once

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include <gtest/gtest.h>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

namespace meshtrain::testing {
namespace detail {

// A readable name for a type_info (demangled where the ABI allows it).
inline std::string type_name(const std::type_info& type) {
#if __has_include(<cxxabi.h>)
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  if (status == 0 && demangled != nullptr) {
    std::string name(demangled);
    std::free(demangled);
    return name;
  }
#endif
  return type.name();
}

// The message of the Exception that `f` throws, or nullopt after adding a test failure when `f`
// throws nothing or throws something that is not an Exception (naming what it threw instead).
template <typename Exception, typename F>
std::optional<std::string> thrown_message(F&& f) {
  const std::string expected = type_name(typeid(Exception));
  try {
    f();
  } catch (const Exception& e) {
    return std::string(e.what());
  } catch (...) {
    try {
      throw;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw the wrong exception type: expected " << expected << ", got "
                    << type_name(typeid(e)) << " with message: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "threw the wrong exception type: expected " << expected
                    << ", got something not derived from std::exception";
    }
    return std::nullopt;
  }
  ADD_FAILURE() << "threw nothing; expected " << expected;
  return std::nullopt;
}

}  // namespace detail

// The message of the Exception that `f` throws, so a test can compare it exactly. Adds a test
// failure, and returns "", when `f` throws nothing or throws something that is not an Exception.
template <typename Exception = std::exception, typename F>
std::string error_message(F&& f) {
  return detail::thrown_message<Exception>(std::forward<F>(f)).value_or("");
}

// Expects `fn` to throw an Exception whose message contains every one of `fragments` (anything
// convertible to std::string_view). A missing fragment fails the test, printing the message and
// the fragment; a missing or wrong-type exception fails it as error_message does.
template <typename Exception, typename Fn, typename... Fragments>
void expect_error(Fn&& fn, const Fragments&... fragments) {
  const std::optional<std::string> message =
      detail::thrown_message<Exception>(std::forward<Fn>(fn));
  if (!message) return;  // already reported
  [[maybe_unused]] const auto expect_fragment = [&](std::string_view fragment) {
    if (message->find(fragment) == std::string::npos)
      ADD_FAILURE() << "message: " << *message << "\nexpected it to contain: " << fragment;
  };
  (expect_fragment(std::string_view(fragments)), ...);
}

}  // namespace meshtrain::testing

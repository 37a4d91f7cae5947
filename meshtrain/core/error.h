// One exception hierarchy for meshtrain, and its two check macros:
//   MT_CHECK(cond, message...)   for anything a caller or user can cause: bad flags, files, API
//                                arguments. Throws InvalidArgument with the message alone, so
//                                the message states the value given and what was expected
//                                ("--steps must be positive, got 0").
//   MT_ASSERT(cond, message...)  for what meshtrain's own code guarantees. Throws InternalError,
//                                which adds the condition and file:line for the bug report;
//                                MT_ASSERT_EQ/NE/LT/LE/GT/GE(a, b, message...) add both values.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace meshtrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class InvalidArgument : public Error {
 public:
  using Error::Error;
};
// A broken invariant of meshtrain's own code: a bug to report, not something the caller did.
class InternalError : public Error {
 public:
  using Error::Error;
};
class NotSupported : public Error {
 public:
  using Error::Error;
};
class CommError : public Error {
 public:
  using Error::Error;
};
class Timeout : public CommError {
 public:
  using CommError::CommError;
};
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
// The message of a failed MT_CHECK or MT_ASSERT, which must have one.
template <typename... Parts>
std::string check_message(const Parts&... parts) {
  static_assert(sizeof...(Parts) > 0,
                "MT_CHECK and MT_ASSERT need a message: what was wrong and what was expected");
  return concat(parts...);
}
[[noreturn]] void throw_invalid_argument(const std::string& message);
// `values` is "" or the "(a vs b)" of an MT_ASSERT_EQ and the like.
[[noreturn]] void throw_internal_error(const char* file, int line, const char* condition,
                                       const std::string& values, const std::string& message);
}  // namespace detail

}  // namespace meshtrain

#define MT_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::meshtrain::detail::throw_invalid_argument(                                            \
          ::meshtrain::detail::check_message(__VA_ARGS__));                                   \
  } while (0)

#define MT_ASSERT(cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::meshtrain::detail::throw_internal_error(__FILE__, __LINE__, #cond, "",                \
                                                ::meshtrain::detail::check_message(__VA_ARGS__)); \
  } while (0)

#define MT_ASSERT_OP_(a, op, b, ...)                                                          \
  do {                                                                                        \
    const auto& mt_lhs_ = (a);                                                                \
    const auto& mt_rhs_ = (b);                                                                \
    if (!(mt_lhs_ op mt_rhs_))                                                                \
      ::meshtrain::detail::throw_internal_error(                                              \
          __FILE__, __LINE__, #a " " #op " " #b,                                              \
          ::meshtrain::detail::concat("(", mt_lhs_, " vs ", mt_rhs_, ")"),                    \
          ::meshtrain::detail::check_message(__VA_ARGS__));                                   \
  } while (0)

#define MT_ASSERT_EQ(a, b, ...) MT_ASSERT_OP_(a, ==, b, __VA_ARGS__)
#define MT_ASSERT_NE(a, b, ...) MT_ASSERT_OP_(a, !=, b, __VA_ARGS__)
#define MT_ASSERT_LT(a, b, ...) MT_ASSERT_OP_(a, <, b, __VA_ARGS__)
#define MT_ASSERT_LE(a, b, ...) MT_ASSERT_OP_(a, <=, b, __VA_ARGS__)
#define MT_ASSERT_GT(a, b, ...) MT_ASSERT_OP_(a, >, b, __VA_ARGS__)
#define MT_ASSERT_GE(a, b, ...) MT_ASSERT_OP_(a, >=, b, __VA_ARGS__)

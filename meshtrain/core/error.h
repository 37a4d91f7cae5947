// One exception hierarchy for meshtrain and check macros that print both values and the place.
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
[[noreturn]] void throw_check_failure(const char* file, int line, const std::string& what,
                                      const std::string& message);
}  // namespace detail

}  // namespace meshtrain

// MT_CHECK(cond, message parts...) throws InvalidArgument naming the condition and the place.
#define MT_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::meshtrain::detail::throw_check_failure(__FILE__, __LINE__, #cond,                \
                                               ::meshtrain::detail::concat(__VA_ARGS__)); \
  } while (0)

// MT_CHECK_OP(a, op, b, message parts...) also prints both values.
#define MT_CHECK_OP(a, op, b, ...)                                                         \
  do {                                                                                     \
    const auto& mt_lhs_ = (a);                                                             \
    const auto& mt_rhs_ = (b);                                                             \
    if (!(mt_lhs_ op mt_rhs_))                                                             \
      ::meshtrain::detail::throw_check_failure(                                            \
          __FILE__, __LINE__, #a " " #op " " #b,                                           \
          ::meshtrain::detail::concat("(", mt_lhs_, " vs ", mt_rhs_, ") ", ##__VA_ARGS__)); \
  } while (0)

#define MT_CHECK_EQ(a, b, ...) MT_CHECK_OP(a, ==, b, ##__VA_ARGS__)
#define MT_CHECK_NE(a, b, ...) MT_CHECK_OP(a, !=, b, ##__VA_ARGS__)
#define MT_CHECK_LT(a, b, ...) MT_CHECK_OP(a, <, b, ##__VA_ARGS__)
#define MT_CHECK_LE(a, b, ...) MT_CHECK_OP(a, <=, b, ##__VA_ARGS__)
#define MT_CHECK_GT(a, b, ...) MT_CHECK_OP(a, >, b, ##__VA_ARGS__)
#define MT_CHECK_GE(a, b, ...) MT_CHECK_OP(a, >=, b, ##__VA_ARGS__)

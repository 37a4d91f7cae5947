// Asserts that a call throws a given exception type whose message holds an expected fragment.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace meshtrain::test {

template <typename Expected, typename Fn>
void expect_error(Fn&& fn, const std::string& fragment) {
  try {
    fn();
  } catch (const Expected& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message: " << e.what() << "\nexpected it to contain: " << fragment;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return;
  }
  ADD_FAILURE() << "threw nothing; expected an error containing: " << fragment;
}

}  // namespace meshtrain::test

// MT_CHECK and MT_ASSERT (meshtrain/core/error.h): what a caller did wrong reads as its message
// alone; a broken invariant of meshtrain's own code is an InternalError that names the condition,
// the values it compared and the place, for the bug report.
#include "meshtrain/core/error.h"

#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using testing::error_message;

static_assert(std::is_base_of_v<Error, InternalError>);
static_assert(!std::is_base_of_v<InvalidArgument, InternalError>);

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void check_steps(int steps) { MT_CHECK(steps > 0, "--steps must be positive, got ", steps); }

TEST(ErrorMacros, CheckThrowsInvalidArgumentWithTheMessageAlone) {
  EXPECT_NO_THROW(check_steps(3));
  EXPECT_EQ(error_message<InvalidArgument>([] { check_steps(0); }),
            "--steps must be positive, got 0");
}

TEST(ErrorMacros, CheckBuildsItsMessageOnlyWhenItFails) {
  int built = 0;
  const auto part = [&] {
    ++built;
    return "part";
  };
  MT_CHECK(true, "never built: ", part());
  EXPECT_EQ(built, 0);
  EXPECT_EQ(error_message<InvalidArgument>([&] { MT_CHECK(false, "built: ", part()); }),
            "built: part");
  EXPECT_EQ(built, 1);
}

TEST(ErrorMacros, AssertThrowsInternalErrorNamingTheConditionAndThePlace) {
  const int covered = 12;
  EXPECT_NO_THROW(MT_ASSERT(covered == 12, "the pieces tile the tensor"));
  int line = 0;
  const std::string what = error_message<InternalError>([&] {
    line = __LINE__ + 1;
    MT_ASSERT(covered == 16, "the pieces do not tile the tensor");
  });
  EXPECT_TRUE(contains(what, "the pieces do not tile the tensor")) << what;
  EXPECT_TRUE(contains(what, "covered == 16")) << what;
  EXPECT_TRUE(contains(what, "error_test.cpp:")) << what;
  EXPECT_EQ(what,
            "internal error (a bug in meshtrain; please report it): the pieces do not tile the "
            "tensor [check failed: covered == 16 at error_test.cpp:" +
                std::to_string(line) + "]");
}

TEST(ErrorMacros, AnInternalErrorIsNoInvalidArgument) {
  bool caught_as_invalid_argument = false, caught_as_internal = false;
  try {
    MT_ASSERT(false, "a bug");
  } catch (const InvalidArgument&) {
    caught_as_invalid_argument = true;
  } catch (const InternalError&) {
    caught_as_internal = true;
  }
  EXPECT_FALSE(caught_as_invalid_argument);
  EXPECT_TRUE(caught_as_internal);
}

TEST(ErrorMacros, AssertEqAddsBothValues) {
  const size_t works = 2, ops = 3;
  EXPECT_NO_THROW(MT_ASSERT_EQ(works, works, "one Work per op"));
  int line = 0;
  const std::string what = error_message<InternalError>([&] {
    line = __LINE__ + 1;
    MT_ASSERT_EQ(works, ops, "the backend must return one Work per op");
  });
  EXPECT_TRUE(contains(what, "(2 vs 3)")) << what;
  EXPECT_EQ(what,
            "internal error (a bug in meshtrain; please report it): the backend must return one "
            "Work per op [check failed: works == ops (2 vs 3) at error_test.cpp:" +
                std::to_string(line) + "]");
}

TEST(ErrorMacros, AssertOpsCompareAsTheirNamesSay) {
  int evaluated = 0;
  const auto one = [&] {
    ++evaluated;
    return 1;
  };
  MT_ASSERT_NE(one(), 2, "ne");
  MT_ASSERT_LT(one(), 2, "lt");
  MT_ASSERT_LE(one(), 1, "le");
  MT_ASSERT_GT(one(), 0, "gt");
  MT_ASSERT_GE(one(), 1, "ge");
  EXPECT_EQ(evaluated, 5);  // each operand once
  EXPECT_TRUE(contains(error_message<InternalError>([] { MT_ASSERT_LT(3, 2, "lt"); }),
                       "[check failed: 3 < 2 (3 vs 2) at "));
  EXPECT_TRUE(contains(error_message<InternalError>([] { MT_ASSERT_GE(1, 2, "ge"); }),
                       "[check failed: 1 >= 2 (1 vs 2) at "));
}

}  // namespace
}  // namespace meshtrain

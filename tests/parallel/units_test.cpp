// make_unit_plan: grouping checks, parameter ownership and the forward/backward orders, on toy
// models whose expected plans are written out by hand.
#include "meshtrain/parallel/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/parallel/toy_model.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::error_message;
using testing::gpt2_like;
using testing::ToyModel;

std::vector<std::string> param_names(const Unit& unit) {
  std::vector<std::string> names;
  for (const Parameter* p : unit.params) names.push_back(p->name());
  return names;
}

TEST(UnitPlan, ContiguousUnits) {
  // s0{p0} s1{p1,p2} s2{p2,p3}: units a={0}, b={1,2}.
  ToyModel model(4, {{0}, {1, 2}, {2, 3}});
  const UnitPlan plan = make_unit_plan(model, {{"a", {0}}, {"b", {2, 1}}});
  ASSERT_EQ(plan.units.size(), 2u);
  EXPECT_EQ(plan.units[0].name, "a");
  EXPECT_EQ(plan.units[1].layers, (std::vector<int>{1, 2}));  // sorted ascending
  EXPECT_EQ(plan.unit_of_layer, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(param_names(plan.units[0]), (std::vector<std::string>{"p0"}));
  // p2 is used twice inside unit b but listed once, in first-use order.
  EXPECT_EQ(param_names(plan.units[1]), (std::vector<std::string>{"p1", "p2", "p3"}));
  EXPECT_EQ(plan.forward_order, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.backward_order, (std::vector<int>{1, 0}));
  EXPECT_TRUE(plan.first_in_unit(1));
  EXPECT_FALSE(plan.last_in_unit(1));
  EXPECT_FALSE(plan.first_in_unit(2));
  EXPECT_TRUE(plan.last_in_unit(2));
  EXPECT_TRUE(plan.first_in_unit(0) && plan.last_in_unit(0));
}

// GPT-2's root unit {0, L+1}: the embedding and the tied head around L blocks.
TEST(UnitPlan, NonContiguousRootUnit) {
  const int L = 2;
  ToyModel model = gpt2_like(L);
  const UnitPlan plan = make_unit_plan(model, model.default_units());
  ASSERT_EQ(plan.units.size(), 3u);
  EXPECT_EQ(plan.units[0].name, "root");
  EXPECT_EQ(plan.units[0].layers, (std::vector<int>{0, 3}));
  EXPECT_EQ(plan.unit_of_layer, (std::vector<int>{0, 1, 2, 0}));
  // The tied p0 belongs to the root once; the head's own p3 joins it after p0.
  EXPECT_EQ(param_names(plan.units[0]), (std::vector<std::string>{"p0", "p3"}));
  EXPECT_EQ(param_names(plan.units[1]), (std::vector<std::string>{"p1"}));
  EXPECT_EQ(param_names(plan.units[2]), (std::vector<std::string>{"p2"}));
  // Forward by first layer: root (0), block0 (1), block1 (2).
  EXPECT_EQ(plan.forward_order, (std::vector<int>{0, 1, 2}));
  // Backward by last layer, descending: root (3), block1 (2), block0 (1).
  EXPECT_EQ(plan.backward_order, (std::vector<int>{0, 2, 1}));
  // The embedding opens the root unit without closing it; the head closes it.
  EXPECT_TRUE(plan.first_in_unit(0));
  EXPECT_FALSE(plan.last_in_unit(0));
  EXPECT_FALSE(plan.first_in_unit(3));
  EXPECT_TRUE(plan.last_in_unit(3));
  for (int s : {1, 2}) EXPECT_TRUE(plan.first_in_unit(s) && plan.last_in_unit(s)) << s;
}

TEST(UnitPlan, OrdersFollowLayersNotSpecOrder) {
  // Units listed in reverse: forward_order still goes by first layer.
  ToyModel model(3, {{0}, {1}, {2}});
  const UnitPlan plan = make_unit_plan(model, {{"c", {2}}, {"b", {1}}, {"a", {0}}});
  EXPECT_EQ(plan.unit_of_layer, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(plan.forward_order, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(plan.backward_order, (std::vector<int>{0, 1, 2}));
}

TEST(UnitPlan, TiedParameterAcrossUnitsNamesBothLayersAndUnits) {
  // GPT-2 shape, but the head in its own unit: the tied p0 would live in two units.
  ToyModel model = gpt2_like(2);
  const std::vector<UnitSpec> specs{
      {"embed", {0}}, {"block0", {1}}, {"block1", {2}}, {"head", {3}}};
  EXPECT_THROW(make_unit_plan(model, specs), InvalidArgument);
  const std::string msg = error_message<InvalidArgument>([&] { make_unit_plan(model, specs); });
  EXPECT_THAT(msg, HasSubstr("parameter 'p0'"));
  EXPECT_THAT(msg, HasSubstr("layer 's0' in unit 'embed'"));
  EXPECT_THAT(msg, HasSubstr("layer 's3' in unit 'head'"));
}

TEST(UnitPlan, LayerInTwoUnits) {
  ToyModel model(3, {{0}, {1}, {2}});
  const std::string msg = error_message<InvalidArgument>(
      [&] { make_unit_plan(model, {{"a", {0, 1}}, {"b", {1, 2}}}); });
  EXPECT_THAT(msg, HasSubstr("layer 's1'"));
  EXPECT_THAT(msg, HasSubstr("unit 'a'"));
  EXPECT_THAT(msg, HasSubstr("unit 'b'"));
}

TEST(UnitPlan, LayerTwiceInOneUnit) {
  ToyModel model(2, {{0}, {1}});
  const std::string msg =
      error_message<InvalidArgument>([&] { make_unit_plan(model, {{"a", {0, 0, 1}}}); });
  EXPECT_THAT(msg, HasSubstr("'s0' twice"));
}

TEST(UnitPlan, LayerInNoUnit) {
  ToyModel model(3, {{0}, {1}, {2}});
  const std::string msg =
      error_message<InvalidArgument>([&] { make_unit_plan(model, {{"a", {0}}, {"c", {2}}}); });
  EXPECT_THAT(msg, HasSubstr("layer 's1' belongs to no unit"));
}

TEST(UnitPlan, LayerOutOfRange) {
  ToyModel model(2, {{0}, {1}});
  const std::string msg =
      error_message<InvalidArgument>([&] { make_unit_plan(model, {{"a", {0, 1, 5}}}); });
  EXPECT_THAT(msg, HasSubstr("unit 'a' names layer 5 of 2"));
  EXPECT_THROW(make_unit_plan(model, {{"a", {-1, 0, 1}}}), InvalidArgument);
}

TEST(UnitPlan, DuplicateUnitNames) {
  ToyModel model(2, {{0}, {1}});
  const std::string msg =
      error_message<InvalidArgument>([&] { make_unit_plan(model, {{"u", {0}}, {"u", {1}}}); });
  EXPECT_THAT(msg, HasSubstr("duplicate unit name 'u'"));
}

TEST(UnitPlan, EmptyNameOrEmptyUnit) {
  ToyModel model(2, {{0}, {1}});
  EXPECT_THROW(make_unit_plan(model, {{"", {0, 1}}}), InvalidArgument);
  EXPECT_THAT(error_message<InvalidArgument>(
                  [&] { make_unit_plan(model, {{"a", {0, 1}}, {"b", {}}}); }),
              HasSubstr("unit 'b' has no layers"));
}

TEST(UnitPlan, TiedParameterInsideOneUnitIsFine) {
  // s0 and s2 share p0 and sit in one unit; s1 between them is its own unit.
  ToyModel model(2, {{0}, {1}, {0}});
  const UnitPlan plan = make_unit_plan(model, {{"outer", {0, 2}}, {"inner", {1}}});
  EXPECT_EQ(param_names(plan.units[0]), (std::vector<std::string>{"p0"}));
  EXPECT_EQ(param_names(plan.units[1]), (std::vector<std::string>{"p1"}));
}

}  // namespace
}  // namespace meshtrain

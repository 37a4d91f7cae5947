// StrategyRegistry: strategies by name; duplicates rejected, unknown names list the known ones.
#include "meshtrain/parallel/strategy_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/parallel/toy_model.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::error_message;

class NamedStrategy : public Strategy {
 public:
  NamedStrategy(std::string name, StrategyKind kind, StrategyOptions options)
      : name_(std::move(name)), kind_(kind), options_(std::move(options)) {}
  std::string name() const override { return name_; }
  StrategyKind kind() const override { return kind_; }
  void apply(ParallelContext&, const std::vector<std::string>&) override {}
  const StrategyOptions& options() const { return options_; }

 private:
  std::string name_;
  StrategyKind kind_;
  StrategyOptions options_;
};

StrategyFactory factory(std::string name, StrategyKind kind) {
  return [name, kind](const StrategyOptions& options) {
    return std::make_unique<NamedStrategy>(name, kind, options);
  };
}

TEST(StrategyRegistry, CreatesByNameWithOptions) {
  StrategyRegistry registry;
  registry.add("fsdp", factory("fsdp", StrategyKind::data));
  registry.add("tp", factory("tp", StrategyKind::tensor));
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"fsdp", "tp"}));
  std::unique_ptr<Strategy> s = registry.create("tp", {{"sequence_parallel", "true"}});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "tp");
  EXPECT_EQ(s->kind(), StrategyKind::tensor);
  const auto* named = dynamic_cast<NamedStrategy*>(s.get());
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->options().at("sequence_parallel"), "true");
  // Each create is a fresh object.
  EXPECT_NE(registry.create("tp", {}).get(), s.get());
}

TEST(StrategyRegistry, DuplicateNameRejected) {
  StrategyRegistry registry;
  registry.add("fsdp", factory("fsdp", StrategyKind::data));
  EXPECT_THROW(registry.add("fsdp", factory("other", StrategyKind::data)), InvalidArgument);
  EXPECT_THAT(error_message<InvalidArgument>(
                  [&] { registry.add("fsdp", factory("fsdp", StrategyKind::data)); }),
              HasSubstr("strategy 'fsdp' is already registered"));
  // The first registration survives.
  EXPECT_EQ(registry.create("fsdp", {})->name(), "fsdp");
  EXPECT_EQ(registry.names().size(), 1u);
}

TEST(StrategyRegistry, EmptyNameOrFactoryRejected) {
  StrategyRegistry registry;
  EXPECT_THROW(registry.add("", factory("x", StrategyKind::data)), InvalidArgument);
  EXPECT_THROW(registry.add("x", nullptr), InvalidArgument);
  EXPECT_TRUE(registry.names().empty());
}

TEST(StrategyRegistry, UnknownNameListsKnownOnes) {
  StrategyRegistry registry;
  registry.add("pp", factory("pp", StrategyKind::pipeline));
  registry.add("fsdp", factory("fsdp", StrategyKind::data));
  EXPECT_THROW(registry.create("zero3", {}), InvalidArgument);
  const std::string msg = error_message<InvalidArgument>([&] { registry.create("zero3", {}); });
  EXPECT_THAT(msg, HasSubstr("unknown strategy 'zero3'"));
  EXPECT_THAT(msg, HasSubstr("fsdp, pp"));
}

TEST(StrategyRegistry, UnknownNameInEmptyRegistry) {
  StrategyRegistry registry;
  EXPECT_THAT(error_message<InvalidArgument>([&] { registry.create("fsdp", {}); }),
              HasSubstr("(none)"));
}

TEST(StrategyKind, NamesAndOrder) {
  EXPECT_EQ(strategy_kind_name(StrategyKind::pipeline), "pipeline");
  EXPECT_EQ(strategy_kind_name(StrategyKind::tensor), "tensor");
  EXPECT_EQ(strategy_kind_name(StrategyKind::data), "data");
  EXPECT_LT(StrategyKind::pipeline, StrategyKind::tensor);
  EXPECT_LT(StrategyKind::tensor, StrategyKind::data);
}

}  // namespace
}  // namespace meshtrain

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

// Records the typed options it was created with.
class NamedStrategy : public Strategy {
 public:
  NamedStrategy(std::string name, StrategyKind kind, const OptionValues* options = nullptr)
      : name_(std::move(name)), kind_(kind) {
    if (options && options->given("sequence_parallel"))
      sequence_parallel_ = options->boolean("sequence_parallel");
  }
  std::string name() const override { return name_; }
  StrategyKind kind() const override { return kind_; }
  void apply(ParallelContext&, const std::vector<std::string>&) override {}
  bool sequence_parallel() const { return sequence_parallel_; }

 private:
  std::string name_;
  StrategyKind kind_;
  bool sequence_parallel_ = false;
};

PluginInfo plugin(std::string name, StrategyKind kind, std::vector<OptionSpec> options = {}) {
  PluginInfo info{.name = name, .help = "", .options = std::move(options), .factory = nullptr};
  info.factory = [name, kind](const OptionValues& values) {
    return std::make_unique<NamedStrategy>(name, kind, &values);
  };
  return info;
}

using Type = OptionSpec::Type;

// A plugin with one option of every type, whose factory keeps what it read.
struct Everything {
  bool flag = false;
  int count = 0;
  std::string mode, layers;
  bool layers_given = true;
};
PluginInfo everything_plugin(Everything* seen) {
  return PluginInfo{
      .name = "every",
      .help = "one option of every type",
      .options = {{.name = "flag", .type = Type::boolean, .help = "", .default_value = "false",
                   .flag = "--flag", .switch_flag = true},
                  {.name = "count", .type = Type::integer, .help = "", .default_value = "2",
                   .minimum = 1},
                  {.name = "mode", .type = Type::choice, .help = "", .default_value = "a",
                   .choices = {"a", "b", "c"}, .flag = "--mode"},
                  {.name = "layers", .type = Type::text, .help = ""}},
      .factory = [seen](const OptionValues& v) -> std::unique_ptr<Strategy> {
        seen->flag = v.boolean("flag");
        seen->count = v.integer("count");
        seen->mode = v.text("mode");
        seen->layers_given = v.given("layers");
        if (seen->layers_given) seen->layers = v.text("layers");
        return std::make_unique<NamedStrategy>("every", StrategyKind::data);
      }};
}

TEST(StrategyRegistry, CreatesByNameWithTypedOptions) {
  StrategyRegistry registry;
  registry.add(plugin("fsdp", StrategyKind::data));
  registry.add(plugin("tp", StrategyKind::tensor,
                      {{.name = "sequence_parallel", .type = Type::boolean, .help = ""}}));
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"fsdp", "tp"}));
  std::unique_ptr<Strategy> s = registry.create("tp", {{"sequence_parallel", "true"}});
  EXPECT_EQ(s->name(), "tp");
  EXPECT_EQ(s->kind(), StrategyKind::tensor);
  EXPECT_TRUE(dynamic_cast<NamedStrategy&>(*s).sequence_parallel());
  EXPECT_NE(registry.create("tp", {}).get(), s.get());  // a new strategy each time
}

TEST(StrategyRegistry, FillsDefaultsAndSaysWhatWasGiven) {
  StrategyRegistry registry;
  Everything seen;
  registry.add(everything_plugin(&seen));
  registry.create("every", {});
  EXPECT_FALSE(seen.flag);
  EXPECT_EQ(seen.count, 2);
  EXPECT_EQ(seen.mode, "a");
  EXPECT_FALSE(seen.layers_given);
  registry.create("every", {{"flag", "true"}, {"count", "7"}, {"mode", "c"}, {"layers", "3,2"}});
  EXPECT_TRUE(seen.flag);
  EXPECT_EQ(seen.count, 7);
  EXPECT_EQ(seen.mode, "c");
  EXPECT_EQ(seen.layers, "3,2");
}

TEST(StrategyRegistry, RefusedValuesNameTheOptionItsFlagAndWhatWasExpected) {
  StrategyRegistry registry;
  Everything seen;
  registry.add(everything_plugin(&seen));
  const auto refusal = [&](const TextOptions& options) {
    return error_message<InvalidArgument>([&] { registry.create("every", options); });
  };
  EXPECT_EQ(refusal({{"flag", "yes"}}), "every option flag (--flag) expects true or false, got 'yes'");
  EXPECT_EQ(refusal({{"count", "0"}}),
            "every option count (--every-count) expects an integer of at least 1, got '0'");
  EXPECT_EQ(refusal({{"count", "2x"}}),
            "every option count (--every-count) expects an integer of at least 1, got '2x'");
  EXPECT_EQ(refusal({{"mode", "d"}}), "every option mode (--mode) expects one of a, b or c, got 'd'");
  EXPECT_EQ(refusal({{"colour", "red"}}),
            "unknown every option 'colour'; known: flag, count, mode, layers");
}

TEST(StrategyRegistry, RejectsMalformedDeclarations) {
  StrategyRegistry registry;
  EXPECT_THAT(error_message<InvalidArgument>([&] {
                registry.add(plugin("x", StrategyKind::data,
                                    {{.name = "a", .type = Type::text, .help = ""},
                                     {.name = "a", .type = Type::text, .help = ""}}));
              }),
              HasSubstr("declares option 'a' twice"));
  EXPECT_THAT(error_message<InvalidArgument>([&] {
                registry.add(plugin("x", StrategyKind::data,
                                    {{.name = "m", .type = Type::choice, .help = ""}}));
              }),
              HasSubstr("without choices"));
  EXPECT_THAT(error_message<InvalidArgument>([&] {
                registry.add(plugin("x", StrategyKind::data,
                                    {{.name = "n", .type = Type::integer, .help = "",
                                      .default_value = "0", .minimum = 1}}));
              }),
              HasSubstr("expects an integer of at least 1, got '0'"));
  EXPECT_TRUE(registry.names().empty());
}

TEST(StrategyRegistry, FlagsDefaultToPluginAndOptionName) {
  EXPECT_EQ(option_flag("fsdp", {.name = "blocks_per_unit", .type = Type::integer, .help = ""}),
            "--fsdp-blocks-per-unit");
  EXPECT_EQ(option_flag("fsdp", {.name = "mode", .type = Type::choice, .help = "", .flag = "--fsdp"}),
            "--fsdp");
}

TEST(StrategyRegistry, RejectsDuplicates) {
  StrategyRegistry registry;
  registry.add(plugin("fsdp", StrategyKind::data));
  EXPECT_THAT(error_message<InvalidArgument>([&] { registry.add(plugin("fsdp", StrategyKind::data)); }),
              HasSubstr("already registered"));
  EXPECT_EQ(registry.create("fsdp", {})->name(), "fsdp");
  EXPECT_EQ(registry.names().size(), 1u);
}

TEST(StrategyRegistry, RejectsEmptyNameAndNullFactory) {
  StrategyRegistry registry;
  EXPECT_THROW(registry.add(plugin("", StrategyKind::data)), InvalidArgument);
  PluginInfo no_factory = plugin("x", StrategyKind::data);
  no_factory.factory = nullptr;
  EXPECT_THROW(registry.add(std::move(no_factory)), InvalidArgument);
  EXPECT_TRUE(registry.names().empty());
}

TEST(StrategyRegistry, UnknownNameListsKnown) {
  StrategyRegistry registry;
  registry.add(plugin("pp", StrategyKind::pipeline));
  registry.add(plugin("fsdp", StrategyKind::data));
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

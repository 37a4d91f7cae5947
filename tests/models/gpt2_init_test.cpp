#include "meshtrain/models/gpt2_init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "meshtrain/core/error.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/parallel/units.h"

namespace meshtrain {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(GPT2Init, NamesAndShapesAreHuggingFaces) {
  GPT2 model(gpt2_preset("tiny"));
  const std::vector<std::pair<std::string, Shape>> expected_prefix = {
      {"wte.weight", {64, 32}},
      {"wpe.weight", {16, 32}},
      {"h.0.ln_1.weight", {32}},
      {"h.0.ln_1.bias", {32}},
      {"h.0.attn.c_attn.weight", {32, 96}},
      {"h.0.attn.c_attn.bias", {96}},
      {"h.0.attn.c_proj.weight", {32, 32}},
      {"h.0.attn.c_proj.bias", {32}},
      {"h.0.ln_2.weight", {32}},
      {"h.0.ln_2.bias", {32}},
      {"h.0.mlp.c_fc.weight", {32, 128}},
      {"h.0.mlp.c_fc.bias", {128}},
      {"h.0.mlp.c_proj.weight", {128, 32}},
      {"h.0.mlp.c_proj.bias", {32}}};
  const std::vector<Parameter*> params = model.parameters();
  ASSERT_EQ(params.size(), 2u + 2 * 12 + 2);
  for (size_t i = 0; i < expected_prefix.size(); ++i) {
    EXPECT_EQ(params[i]->name(), expected_prefix[i].first);
    EXPECT_EQ(params[i]->shape(), expected_prefix[i].second) << params[i]->name();
  }
  EXPECT_EQ(params[params.size() - 2]->name(), "ln_f.weight");
  EXPECT_EQ(params.back()->name(), "ln_f.bias");
  int64_t total = 0;
  for (Parameter* p : params) total += p->numel();
  EXPECT_EQ(total, gpt2_preset("tiny").num_parameters());
  EXPECT_THROW(model.parameter("lm_head.weight"), InvalidArgument);
}

TEST(GPT2Init, LayersAndDefaultUnits) {
  GPT2 model(gpt2_preset("tiny"));
  const std::vector<Layer*> layers = model.layers();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0]->name(), "embedding");
  EXPECT_EQ(layers[1]->name(), "h.0");
  EXPECT_EQ(layers[3]->name(), "head");
  // The head reads the tied wte: the same Parameter as the embedding.
  EXPECT_EQ(layers[0]->parameters()[0], layers[3]->parameters()[2]);
  const std::vector<UnitSpec> units = model.default_units();
  ASSERT_EQ(units.size(), 3u);
  EXPECT_EQ(units[0].name, "root");
  EXPECT_EQ(units[0].layers, (std::vector<int>{0, 3}));
  EXPECT_EQ(units[2].name, "h.1");
  EXPECT_EQ(units[2].layers, (std::vector<int>{2}));
  const UnitPlan plan = make_unit_plan(model, units);
  EXPECT_EQ(plan.units[0].params.size(), 4u);  // wte, wpe, ln_f.weight, ln_f.bias
  EXPECT_EQ(plan.units[1].params.size(), 12u);
}

TEST(GPT2Init, DeterministicPerSeed) {
  GPT2 a(gpt2_preset("tiny"), {.seed = 7});
  GPT2 b(gpt2_preset("tiny"), {.seed = 7});
  GPT2 c(gpt2_preset("tiny"), {.seed = 8});
  for (Parameter* p : a.parameters()) {
    EXPECT_TRUE(same_bits(p->value(), b.parameter(p->name()).value())) << p->name();
    if (p->decays()) {
      EXPECT_FALSE(same_bits(p->value(), c.parameter(p->name()).value())) << p->name();
    }
  }
  // Re-initialising restores the construction values.
  a.parameter("wte.weight").value().zero_();
  a.init(7);
  EXPECT_TRUE(same_bits(a.parameter("wte.weight").value(), b.parameter("wte.weight").value()));
}

TEST(GPT2Init, AnySliceMatchesTheFullTensor) {
  // What a rank holding a shard computes: elements [offset, offset + count) alone.
  const GPT2Config config = gpt2_preset("tiny");
  GPT2 model(config, {.seed = 3});
  for (const char* name : {"wte.weight", "h.1.attn.c_proj.weight", "h.0.ln_1.weight"}) {
    const std::vector<float> full = model.parameter(name).value().to_vector();
    const auto size = static_cast<int64_t>(full.size());
    for (int64_t offset : {int64_t{0}, int64_t{1}, size / 3, size - 5}) {
      const int64_t count = std::min<int64_t>(33, size - offset);
      std::vector<float> slice(static_cast<size_t>(count));
      gpt2_init_values(config, name, 3, offset, count, slice.data());
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(slice[i], full[offset + i]) << name << " " << offset + i;
    }
  }
  float out;
  EXPECT_THROW(gpt2_init_values(config, "h.0.attn.bias", 3, 0, 1, &out), InvalidArgument);
}

TEST(GPT2Init, DistributionsFollowGPT2) {
  const GPT2Config config{256, 64, 128, 8, 4};
  GPT2 model(config);
  const auto stddev = [](const std::vector<float>& v) {
    double mean = 0, sq = 0;
    for (float x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (float x : v) sq += (x - mean) * (x - mean);
    return std::sqrt(sq / static_cast<double>(v.size()));
  };
  EXPECT_NEAR(stddev(model.parameter("wte.weight").value().to_vector()), 0.02, 0.0005);
  EXPECT_NEAR(stddev(model.parameter("h.0.mlp.c_fc.weight").value().to_vector()), 0.02, 0.0005);
  EXPECT_NEAR(stddev(model.parameter("h.3.mlp.c_proj.weight").value().to_vector()), 0.005, 0.0002);
  EXPECT_NEAR(stddev(model.parameter("h.3.attn.c_proj.weight").value().to_vector()), 0.005, 0.0002);
  for (float x : model.parameter("h.2.attn.c_attn.bias").value().to_vector()) ASSERT_EQ(x, 0.0f);
  for (float x : model.parameter("ln_f.weight").value().to_vector()) ASSERT_EQ(x, 1.0f);
  for (float x : model.parameter("h.5.ln_2.bias").value().to_vector()) ASSERT_EQ(x, 0.0f);
  for (float x : model.parameter("h.5.ln_2.weight").value().to_vector()) ASSERT_EQ(x, 1.0f);
}

TEST(GPT2Init, ChargesParamsAndGradsToTheirCategories) {
  MemoryTracker tracker;
  const GPT2Config config = gpt2_preset("tiny");
  {
    MemoryScope scope(&tracker);
    GPT2 model(config);
    const MemoryStats stats = tracker.stats(DeviceKind::cpu);
    const size_t bytes = static_cast<size_t>(config.num_parameters()) * sizeof(float);
    EXPECT_EQ(stats[MemoryCategory::param].current, bytes);
    EXPECT_EQ(stats[MemoryCategory::grad].current, bytes);
    for (Parameter* p : model.parameters())
      for (float g : p->grad().to_vector()) ASSERT_EQ(g, 0.0f) << p->name();
  }
  EXPECT_EQ(tracker.stats(DeviceKind::cpu).total.current, 0u);
}

TEST(GPT2Init, UnmaterializedModelHasNoTensors) {
  MemoryTracker tracker;
  MemoryScope scope(&tracker);
  GPT2 model(gpt2_preset("gpt2-xl"), {.materialize = false});
  EXPECT_EQ(tracker.stats(DeviceKind::cpu).total.current, 0u);
  EXPECT_EQ(model.parameters().size(), 2u + 48 * 12 + 2);
  EXPECT_THROW(model.parameter("wte.weight").value(), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

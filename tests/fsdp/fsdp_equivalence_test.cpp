// Every FSDP layout reproduces the single-rank run of the same model, step by step: ten steps from
// the same initial weights on the same global batches give each step's loss within 1e-5 relative
// and final parameters within 1e-5, on a model whose sizes do not divide by the world size.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/fsdp/fsdp_runs.h"

namespace meshtrain::testing {
namespace {

struct Layout {
  int world;
  const char* mesh;  // empty: dp_shard = world
  FsdpMode mode;
  int64_t grad_accum;
  GradSync sync;
  float clip;
};

// V=67, T=13, d=24, 3d=72, 4d=96: no parameter's dim 0 divides by 3 or 8, few by 2 or 4.
GPT2Config uneven_model() { return GPT2Config{67, 13, 24, 2, 4}; }

const RunResult& reference(float clip) {
  static const std::string data = synthetic_token_file(67, 4096);
  static std::map<float, RunResult> cache;
  auto it = cache.find(clip);
  if (it == cache.end()) {
    TrainConfig c = small_config(uneven_model(), data);
    c.clip = clip;
    it = cache.emplace(clip, run_reference(c)).first;
  }
  return it->second;
}

class FsdpEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(FsdpEquivalence, MatchesTheSingleRankRun) {
  const Layout& l = GetParam();
  TrainConfig c = small_config(uneven_model(), synthetic_token_file(67, 4096));
  c.world = l.world;
  if (*l.mesh) c.mesh = parse_mesh_spec(l.mesh);
  c.fsdp.mode = l.mode;
  c.fsdp.grad_sync = l.sync;
  c.grad_accum = l.grad_accum;
  c.clip = l.clip;
  const RunResult got = run_on_mesh(c);
  const RunResult& want = reference(l.clip);

  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::abs(want.losses[s])) << "step " << s;
  EXPECT_LT(want.losses.back(), want.losses.front()) << "the run must train for the test to mean much";
  if (l.clip > 0) {
    ASSERT_FALSE(got.metrics.empty());
    EXPECT_GT(got.metrics.front().grad_norm, l.clip) << "clipping must be active";
  }

  ASSERT_EQ(got.params.size(), want.params.size());
  for (const auto& [name, values] : want.params) {
    const auto it = got.params.find(name);
    ASSERT_NE(it, got.params.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    float worst = 0.f;
    size_t at = 0;
    for (size_t i = 0; i < values.size(); ++i)
      if (std::abs(it->second[i] - values[i]) > worst) {
        worst = std::abs(it->second[i] - values[i]);
        at = i;
      }
    EXPECT_LE(worst, 1e-5f) << name << " element " << at << ": " << it->second[at] << " vs "
                            << values[at];
  }
}

std::vector<Layout> layouts() {
  std::vector<Layout> all;
  const auto add_variants = [&](int world, const char* mesh, FsdpMode mode) {
    all.push_back({world, mesh, mode, 1, GradSync::every_micro_batch, 0.f});
    all.push_back({world, mesh, mode, 2, GradSync::every_micro_batch, 0.f});
    all.push_back({world, mesh, mode, 2, GradSync::last_micro_batch, 0.25f});
  };
  for (int world : {1, 2, 3, 4, 8})
    for (FsdpMode mode : {FsdpMode::full, FsdpMode::grad_op, FsdpMode::none})
      add_variants(world, "", mode);
  add_variants(4, "dp_replicate=2,dp_shard=2", FsdpMode::hybrid);
  add_variants(8, "dp_replicate=2,dp_shard=4", FsdpMode::hybrid);
  return all;
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const Layout& l = info.param;
  std::string name = "W" + std::to_string(l.world) + "_" + std::string(fsdp_mode_name(l.mode));
  if (l.grad_accum > 1)
    name += "_accum" + std::to_string(l.grad_accum) +
            (l.sync == GradSync::every_micro_batch ? "_every" : "_last");
  if (l.clip > 0) name += "_clip";
  return name;
}

INSTANTIATE_TEST_SUITE_P(Layouts, FsdpEquivalence, ::testing::ValuesIn(layouts()), layout_name);

}  // namespace
}  // namespace meshtrain::testing

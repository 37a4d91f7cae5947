// End to end through run_training: FSDP and tensor-parallel layouts on local ranks reproduce the
// single-rank run step by step (same data, same initialisation): losses and gradient norms within
// 1e-5 relative.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "meshtrain/train/run_training.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using testing::ScratchDir;

struct Layout {
  const char* name;
  int world;
  const char* mesh;  // empty: dp_shard=world
  const char* mode;  // fsdp's; empty for a mesh without data axes
  int64_t grad_accum = 1;
  bool sequence_parallel = false;
};

class LayoutEquivalence : public ::testing::TestWithParam<Layout> {};

TrainConfig base_config(const std::string& data) {
  TrainConfig c;
  c.model = gpt2_model(gpt2_preset("demo"));
  c.data_path = data;
  c.steps = 5;
  c.batch = 12;  // divides by 1, 2, 3 and 4
  c.seq = 32;
  c.lr.lr = 1e-3f;
  c.sample_bytes = 0;
  c.quiet = true;
  return c;
}

TEST_P(LayoutEquivalence, MatchesOneRankStepByStep) {
  const Layout& layout = GetParam();
  ScratchDir dir;
  const std::string data = dir.file("tokens.bin");
  testing::write_text(dir.file("text.txt"), testing::sample_prose(40));
  prepare_byte_tokens(dir.file("text.txt"), data);

  std::ostringstream out;
  const TrainConfig single = base_config(data);
  const std::vector<StepMetrics> expected = run_training(single, out, false);

  TrainConfig multi = base_config(data);
  multi.world = layout.world;
  if (*layout.mesh) multi.mesh = parse_mesh_spec(layout.mesh);
  if (*layout.mode) multi.set("fsdp", "mode", layout.mode);
  if (layout.sequence_parallel) multi.set("tp", "sequence_parallel", "true");
  multi.grad_accum = layout.grad_accum;
  const std::vector<StepMetrics> actual = run_training(multi, out, false);

  ASSERT_EQ(expected.size(), 5u);
  ASSERT_EQ(actual.size(), 5u);
  for (size_t s = 0; s < expected.size(); ++s) {
    EXPECT_NEAR(actual[s].loss, expected[s].loss, 1e-5 * std::abs(expected[s].loss))
        << "step " << s;
    EXPECT_NEAR(actual[s].grad_norm, expected[s].grad_norm, 1e-5 * expected[s].grad_norm)
        << "step " << s;
    EXPECT_EQ(actual[s].peak_mem_per_rank.size(), static_cast<size_t>(layout.world));
  }
  // The run must actually train, or equal losses would prove little.
  EXPECT_LT(expected.back().loss, expected.front().loss - 0.05);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutEquivalence,
    ::testing::Values(Layout{"full4", 4, "", "full"}, Layout{"full3", 3, "", "full"},
                      Layout{"grad_op4", 4, "", "grad_op"}, Layout{"none2", 2, "", "none"},
                      Layout{"hybrid2x2", 4, "dp_replicate=2,dp_shard=2", "hybrid"},
                      Layout{"full2_accum3", 2, "", "full", 3},
                      Layout{"tp2", 2, "tp=2", ""},
                      Layout{"full2_tp2_sp", 4, "dp_shard=2,tp=2", "full", 1, true},
                      Layout{"hybrid2x2_tp2", 8, "dp_replicate=2,dp_shard=2,tp=2", "hybrid"}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace meshtrain

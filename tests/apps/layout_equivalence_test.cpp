// Every FSDP layout on local ranks reproduces the single-rank run step by step: same data, same
// initialisation, losses within 1e-5 relative.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "apps/train/run_training.h"
#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using testing::ScratchDir;

struct Layout {
  const char* name;
  int world;
  const char* mesh;  // empty: dp_shard=world
  FsdpMode mode;
  int64_t grad_accum = 1;
};

class FsdpEquivalence : public ::testing::TestWithParam<Layout> {};

TrainConfig base_config(const std::string& data) {
  TrainConfig c;
  c.model = gpt2_preset("demo");
  c.data_path = data;
  c.steps = 5;
  c.batch = 12;  // divides by 1, 2, 3 and 4
  c.seq = 32;
  c.lr.lr = 1e-3f;
  c.sample_bytes = 0;
  c.quiet = true;
  return c;
}

TEST_P(FsdpEquivalence, MatchesOneRankStepByStep) {
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
  multi.fsdp.mode = layout.mode;
  multi.grad_accum = layout.grad_accum;
  const std::vector<StepMetrics> actual = run_training(multi, out, false);

  ASSERT_EQ(expected.size(), 5u);
  ASSERT_EQ(actual.size(), 5u);
  for (size_t s = 0; s < expected.size(); ++s) {
    EXPECT_NEAR(actual[s].loss, expected[s].loss, 1e-5 * std::abs(expected[s].loss))
        << "step " << s;
    EXPECT_EQ(actual[s].peak_mem_per_rank.size(), static_cast<size_t>(layout.world));
  }
  // The run must actually train, or equal losses would prove little.
  EXPECT_LT(expected.back().loss, expected.front().loss - 0.05);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, FsdpEquivalence,
    ::testing::Values(Layout{"full4", 4, "", FsdpMode::full},
                      Layout{"full3", 3, "", FsdpMode::full},
                      Layout{"grad_op4", 4, "", FsdpMode::grad_op},
                      Layout{"none2", 2, "", FsdpMode::none},
                      Layout{"hybrid2x2", 4, "dp_replicate=2,dp_shard=2", FsdpMode::hybrid},
                      Layout{"full2_accum3", 2, "", FsdpMode::full, 3}),
    [](const ::testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace meshtrain

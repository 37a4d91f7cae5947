// Every pipeline schedule, alone and composed with FSDP and TP, reproduces the single-rank run of
// the same model step by step: each step's loss and gradient norm within 1e-5 relative, the final
// parameters (gathered from every stage) within 1e-5. GPT-2's tied wte lives on the first and the
// last stage; its gradients are summed across them, so both copies stay equal.
#include <gtest/gtest.h>

#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// 6 blocks: 8 layers, enough for 4 ranks x 2 virtual stages.
TrainConfig deep_config() {
  TrainConfig c = small_config(GPT2Config{67, 13, 24, 6, 4}, synthetic_token_file(67, 4096));
  c.steps = 4;
  c.batch = 120;  // divides by every micro-batch count below (and by 2 more for dp_shard=2)
  return c;
}

const RunResult& deep_reference(float clip) {
  static std::map<float, RunResult> cache;
  auto it = cache.find(clip);
  if (it == cache.end()) {
    TrainConfig c = deep_config();
    c.clip = clip;
    it = cache.emplace(clip, run_reference(c)).first;
  }
  return it->second;
}

struct Layout {
  std::string name;
  int world;
  std::string mesh;
  std::string schedule;
  int virtual_stages;
  int micro_batches;
  std::string fsdp_mode;  // empty: no data axis
  bool sequence_parallel = false;
  float clip = 0.f;
};

class PpEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(PpEquivalence, MatchesTheSingleRankRun) {
  const Layout& l = GetParam();
  TrainConfig c = deep_config();
  c.world = l.world;
  c.mesh = parse_mesh_spec(l.mesh);
  c.grad_accum = l.micro_batches;
  c.clip = l.clip;
  c.set("pp", "schedule", l.schedule).set("pp", "virtual", std::to_string(l.virtual_stages));
  if (!l.fsdp_mode.empty()) c.set("fsdp", "mode", l.fsdp_mode);
  if (l.sequence_parallel) c.set("tp", "sequence_parallel", "true");
  const RunResult got = run_on_mesh(c);
  expect_same_run(got, deep_reference(l.clip));
  if (l.clip > 0) {
    EXPECT_GT(got.grad_norms.front(), l.clip) << "clipping must be active";
  }
}

std::vector<Layout> layouts() {
  std::vector<Layout> all;
  // Every schedule at pp = 2 and 4 with m = p, 2p and an odd m > p.
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int>>{
           {"gpipe", 1}, {"1f1b", 1}, {"interleaved", 2}, {"zb-h1", 1}})
    for (int p : {2, 4})
      for (int m : {p, 2 * p, p + 1}) {
        std::string name = schedule + "_pp" + std::to_string(p) + "_m" + std::to_string(m);
        for (char& ch : name)
          if (ch == '-') ch = '_';
        all.push_back({name, p, "pp=" + std::to_string(p), schedule, v, m, ""});
      }
  // Interleaved at p = 2 with m = 5: rank 0 sends micro-batch 0's gradient between the
  // activations of micro-batches 2 and 3, which rank 1 receives in a row.
  all.push_back({"interleaved_pp2_m5", 2, "pp=2", "interleaved", 2, 5, ""});
  // Composition: PP x FSDP, PP x TP, and 3D (with clipping), on every schedule kind.
  all.push_back({"1f1b_pp2_fsdp2_full", 4, "pp=2,dp_shard=2", "1f1b", 1, 4, "full"});
  all.push_back({"interleaved_pp2_fsdp2_grad_op", 4, "pp=2,dp_shard=2", "interleaved", 2, 4,
                 "grad_op"});
  // One pp rank with two virtual stages: its micro-batches interleave under FSDP too.
  all.push_back({"interleaved_pp1_fsdp2_full", 2, "pp=1,dp_shard=2", "interleaved", 2, 2, "full"});
  all.push_back({"gpipe_pp2_tp2", 4, "pp=2,tp=2", "gpipe", 1, 2, ""});
  all.push_back({"zb_h1_pp2_tp2_sp", 4, "pp=2,tp=2", "zb-h1", 1, 3, "", true});
  all.push_back({"3d_1f1b_full_clip", 8, "pp=2,dp_shard=2,tp=2", "1f1b", 1, 4, "full", false,
                 0.25f});
  all.push_back({"3d_interleaved_full_sp_clip", 8, "pp=2,dp_shard=2,tp=2", "interleaved", 2, 2,
                 "full", true, 0.25f});
  all.push_back({"4d_zb_h1_hybrid", 16, "pp=2,dp_replicate=2,dp_shard=2,tp=2", "zb-h1", 1, 3,
                 "hybrid"});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, PpEquivalence, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace meshtrain::testing

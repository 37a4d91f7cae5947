// Activation checkpointing: the same kernels on the same inputs, so `--ac full` and `selective`
// reproduce the run without it bit for bit (every loss, gradient norm and final parameter equal,
// not merely close) for GPT-2 and Llama under FSDP, TP with sequence parallelism, pipeline
// schedules (ZB-H1's split backward included) and 3D; and what it saves, from the allocators'
// counters: under `full` each further block costs the activation memory of its input alone.
#include <gtest/gtest.h>

#include "meshtrain/models/llama_family.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

struct Layout {
  std::string name;
  bool llama;
  int world;
  std::string mesh;
  std::string schedule = "";  // empty: no pipeline
  int micro_batches = 1;
  bool sequence_parallel = false;
};

TrainConfig config_of(const Layout& l, const ActivationCheckpointing& ac) {
  TrainConfig c = uneven_config();
  c.steps = 3;
  if (l.llama)
    c.model = llama_model(LlamaConfig{.vocab = 67,
                                      .ctx = 13,
                                      .dim = 32,
                                      .ffn_dim = 44,
                                      .layers = 4,
                                      .heads = 8,
                                      .kv_heads = 4,
                                      .rope_theta = 10000,
                                      .rms_norm_eps = 1e-5});
  else
    c.model = gpt2_model(GPT2Config{67, 13, 24, 4, 4});
  c.world = l.world;
  c.mesh = parse_mesh_spec(l.mesh);
  c.grad_accum = l.micro_batches;
  c.clip = 0.25f;
  if (l.mesh.find("dp_shard") != std::string::npos) c.set("fsdp", "mode", "full");
  if (l.sequence_parallel) c.set("tp", "sequence_parallel", "true");
  if (!l.schedule.empty()) c.set("pp", "schedule", l.schedule);
  c.ac = ac;
  return c;
}

void expect_identical(const RunResult& got, const RunResult& want, const std::string& what) {
  EXPECT_EQ(got.losses, want.losses) << what;
  EXPECT_EQ(got.grad_norms, want.grad_norms) << what;
  EXPECT_EQ(got.params, want.params) << what;
}

class AcIdentical : public ::testing::TestWithParam<Layout> {};

TEST_P(AcIdentical, LossesGradientsAndParametersAreBitForBitTheRunWithoutIt) {
  const Layout& l = GetParam();
  const RunResult none = run_on_mesh(config_of(l, {}));
  const RunResult full = run_on_mesh(config_of(l, {.mode = AcMode::full}));
  const RunResult selective = run_on_mesh(config_of(l, {.mode = AcMode::selective, .every = 2}));
  expect_identical(full, none, "full");
  expect_identical(selective, none, "selective, every 2nd block");
  // It did recompute: the peak falls when blocks keep only their input. (Under ZB-H1 the tapes a
  // split backward defers for the weight gradients can set the peak, so selective's may equal
  // full's.)
  const auto peak = [](const RunResult& r) { return r.metrics.back().peak_mem_bytes; };
  EXPECT_LE(peak(full), peak(selective));
  EXPECT_LT(peak(selective), peak(none));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AcIdentical,
    ::testing::Values(
        Layout{.name = "gpt2_one_rank", .llama = false, .world = 1, .mesh = "dp_shard=1"},
        Layout{.name = "gpt2_fsdp4", .llama = false, .world = 4, .mesh = "dp_shard=4"},
        Layout{.name = "llama_fsdp4", .llama = true, .world = 4, .mesh = "dp_shard=4"},
        Layout{.name = "llama_tp2_sp",
               .llama = true,
               .world = 2,
               .mesh = "tp=2",
               .sequence_parallel = true},
        Layout{.name = "gpt2_pp2_1f1b",
               .llama = false,
               .world = 2,
               .mesh = "pp=2",
               .schedule = "1f1b",
               .micro_batches = 4},
        Layout{.name = "llama_pp2_zb_h1",
               .llama = true,
               .world = 2,
               .mesh = "pp=2",
               .schedule = "zb-h1",
               .micro_batches = 3},
        Layout{.name = "llama_3d",
               .llama = true,
               .world = 8,
               .mesh = "pp=2,dp_shard=2,tp=2",
               .schedule = "1f1b",
               .micro_batches = 2,
               .sequence_parallel = true}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

// The activation peak of one training step on one rank of a GPT-2 of `layers` blocks.
size_t activation_peak(int64_t layers, AcMode mode) {
  TrainConfig c = uneven_config();
  c.model = gpt2_model(GPT2Config{67, 13, 24, layers, 4});
  c.steps = 1;
  c.ac.mode = mode;
  size_t peak = 0;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    memory.reset_peaks();
    trainer.step();
    peak = memory.stats(DeviceKind::cpu)[MemoryCategory::activation].peak;
  });
  return peak;
}

// Without checkpointing every block keeps all it saves for backward; with `full` it keeps its
// input alone, [b * T, d] f32, so four more blocks cost four inputs.
TEST(AcMemory, FullKeepsOneInputPerBlock) {
  const auto input_bytes = static_cast<size_t>(48 * 12 * 24 * sizeof(float));  // batch x seq x d
  const size_t full_4 = activation_peak(4, AcMode::full), full_8 = activation_peak(8, AcMode::full);
  const size_t none_4 = activation_peak(4, AcMode::none), none_8 = activation_peak(8, AcMode::none);
  EXPECT_EQ(full_8 - full_4, 4 * input_bytes);
  EXPECT_GT(none_8 - none_4, 8 * 4 * input_bytes) << "a block saves far more than its input";
  EXPECT_LT(full_8, none_8 / 2);
}

TEST(AcConfig, RefusesASelectiveStrideBelowOne) {
  TrainConfig c = uneven_config();
  c.ac = {.mode = AcMode::selective, .every = 0};
  expect_error<InvalidArgument>([&] { c.validate(); }, "--ac-every", "got 0");
  expect_error<InvalidArgument>([] { parse_ac_mode("some"); }, "none, full or selective", "'some'");
}

}  // namespace
}  // namespace meshtrain::testing

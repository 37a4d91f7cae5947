// The planner's model-state bytes against real runs on the local backend: after one step every
// rank's allocators hold exactly the predicted parameters, gradients and AdamW moments, the step
// reports the predicted largest sharded state, and the peak of full parameters is the predicted
// one. GPT-2 and Llama at sizes no mesh divides evenly, under FSDP's modes, HSDP, TP, PP and 3D.
#include <gtest/gtest.h>

#include <mutex>
#include <ostream>

#include "meshtrain/models/llama_family.h"
#include "meshtrain/plan/model_state.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

struct Case {
  std::string name;
  std::string mesh;
  std::string fsdp_mode = "full";  // for meshes with a data axis
  std::string param_dtype = "f32";
  int virtual_stages = 1;  // under pp
};

struct Family {
  std::string name;
  ModelSpecPtr spec;
};

void PrintTo(const Case& k, std::ostream* os) { *os << k.name; }
void PrintTo(const Family& f, std::ostream* os) { *os << f.name; }

TrainConfig config_of(const ModelSpecPtr& model, const Case& k) {
  TrainConfig c = uneven_config();
  c.model = model;
  c.steps = 1;
  c.mesh = parse_mesh_spec(k.mesh);
  c.world = c.mesh.size();
  if (c.mesh.has_axis("dp_shard") || c.mesh.has_axis("dp_replicate"))
    c.set("fsdp", "mode", k.fsdp_mode).set("fsdp", "param_dtype", k.param_dtype);
  if (c.mesh.has_axis("pp")) {
    c.grad_accum = 2;
    c.set("pp", "virtual", std::to_string(k.virtual_stages));
    if (k.virtual_stages > 1) c.set("pp", "schedule", "interleaved");
  }
  return c;
}

class ModelStateRun : public ::testing::TestWithParam<std::tuple<Family, Case>> {};

TEST_P(ModelStateRun, EqualsTheAllocatorsCounters) {
  const auto& [family, k] = GetParam();
  const TrainConfig c = config_of(family.spec, k);
  const ModelStatePrediction predicted = model_state_bytes(*c.model, plan_layout(c));
  ASSERT_EQ(predicted.ranks.size(), static_cast<size_t>(c.world));

  std::vector<MemoryStats> held(static_cast<size_t>(c.world));
  StepMetrics metrics;
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    const StepMetrics m = trainer.step();
    std::lock_guard<std::mutex> lock(mutex);
    held[trainer.rank()] = memory.stats(DeviceKind::cpu);
    if (trainer.rank() == 0) metrics = m;
  });

  for (const RankModelState& r : predicted.ranks) {
    const MemoryStats& s = held[r.rank];
    EXPECT_EQ(s[MemoryCategory::param].current, r.bytes.parameters) << "rank " << r.rank;
    EXPECT_EQ(s[MemoryCategory::grad].current, r.bytes.gradients) << "rank " << r.rank;
    EXPECT_EQ(s[MemoryCategory::optimizer].current, r.bytes.optimizer) << "rank " << r.rank;
  }
  EXPECT_EQ(metrics.sharded_state_bytes, predicted.max_sharded_state());
  EXPECT_EQ(metrics.unsharded_param_peak_bytes, predicted.max_unsharded_unit_buffers());
}

const Family kFamilies[] = {{"gpt2", gpt2_model(uneven_model())},
                            {"llama", llama_model(uneven_llama(2, /*tied=*/false))},
                            {"llama_tied", llama_model(uneven_llama(2, /*tied=*/true))}};

INSTANTIATE_TEST_SUITE_P(
    Layouts, ModelStateRun,
    ::testing::Combine(::testing::ValuesIn(kFamilies),
                       ::testing::Values(Case{"fsdp4_full", "dp_shard=4"},
                                         Case{"fsdp4_full_bf16", "dp_shard=4", "full", "bf16"},
                                         Case{"fsdp4_grad_op", "dp_shard=4", "grad_op"},
                                         Case{"ddp2_bf16", "dp_shard=2", "none", "bf16"},
                                         Case{"hsdp2x2", "dp_replicate=2,dp_shard=2", "hybrid"},
                                         Case{"tp2", "tp=2"}, Case{"fsdp2_tp2", "dp_shard=2,tp=2"},
                                         Case{"pp2_fsdp2", "pp=2,dp_shard=2"},
                                         Case{"pp2_interleaved", "pp=2", "full", "f32", 2},
                                         Case{"pp2_fsdp2_tp2_bf16", "pp=2,dp_shard=2,tp=2", "full",
                                              "bf16"})),
    [](const auto& info) {
      return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
    });

}  // namespace
}  // namespace meshtrain::testing

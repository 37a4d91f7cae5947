// Sharded initialisation: no rank ever holds the full model. While a Trainer is built, from the
// seed or from a safetensors file (--init), each rank's memory peak stays within its sharded
// state plus one FSDP unit's full parameters, on FSDP alone and on FSDP x TP; the values it ends
// up with are exactly the file's (or the single-rank initialisation's).
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

void expect_bounded_init(const TrainConfig& c, const GPT2& expected) {
  int64_t largest_unit = 0;
  for (const UnitSizes& u : gpt2_units(gpt2_config(*c.model), 1)) largest_unit = std::max(largest_unit, u.full);
  std::map<std::string, std::vector<float>> gathered;
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    const MemoryStats mem = memory.stats(DeviceKind::cpu);
    const uint64_t sharded = mem[MemoryCategory::param].current + mem[MemoryCategory::grad].current;
    EXPECT_GT(sharded, 0u);
    EXPECT_LE(mem.total.peak, sharded + 4u * static_cast<uint64_t>(largest_unit))
        << "rank " << trainer.rank() << " on " << c.mesh.to_string();
    trainer.gather_parameters([&](const Parameter& p, const Tensor& value) {
      std::lock_guard lock(mutex);
      gathered[p.name()] = value.to_vector();
    });
  });
  ASSERT_EQ(gathered.size(), expected.config().layers * 12 + 4);
  for (const auto& [name, values] : gathered)
    EXPECT_EQ(values, const_cast<GPT2&>(expected).parameter(name).value().to_vector()) << name;
}

TEST(ShardedInit, FromTheSeedPeakStaysWithinTheShardsPlusOneUnit) {
  for (const char* mesh : {"dp_shard=4", "dp_shard=2,tp=2"}) {
    TrainConfig c = uneven_config();
    c.world = 4;
    c.mesh = parse_mesh_spec(mesh);
    expect_bounded_init(c, GPT2(gpt2_config(*c.model), {.seed = c.seed}));
  }
}

TEST(ShardedInit, FromAFileReadsOnlyTheLocalSlices) {
  ScratchDir dir;
  TrainConfig c = uneven_config();
  GPT2 file_model(gpt2_config(*c.model), {.seed = 99});  // values no seed of the run gives
  save_parameters(file_model.parameters(), dir.file("init.safetensors"));
  c.init_path = dir.file("init.safetensors");
  for (const char* mesh : {"dp_shard=4", "dp_shard=2,tp=2"}) {
    c.world = 4;
    c.mesh = parse_mesh_spec(mesh);
    expect_bounded_init(c, file_model);
  }
}

}  // namespace
}  // namespace meshtrain::testing

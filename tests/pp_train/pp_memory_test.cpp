// Peak activation memory per pipeline rank follows the schedule, from the allocators' counters:
// the first stage holds every micro-batch's activations under GPipe (all forwards run before the
// first backward) and at most p under 1F1B (each backward frees one before the next forward), and
// ZB-H1 as many plus its deferred weight-gradient inputs. Micro-batches have the same size in every run, so each holds the same bytes.
#include <gtest/gtest.h>

#include "meshtrain/mesh/axis_names.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

constexpr int kRanks = 4;

// The activation peak of one step on the first stage (pp rank 0), with m micro-batches of 2
// sequences each.
size_t first_stage_peak(const std::string& schedule, int m) {
  TrainConfig c = small_config(GPT2Config{67, 13, 24, 6, 4}, synthetic_token_file(67, 4096));
  c.steps = 1;
  c.batch = 2 * m;
  c.grad_accum = m;
  c.world = kRanks;
  c.mesh = parse_mesh_spec("pp=" + std::to_string(kRanks));
  c.set("pp", "schedule", schedule);
  size_t peak = 0;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker& memory) {
    trainer.step();
    if (trainer.mesh().axis_rank(mesh_axis::pp) == 0)
      peak = memory.stats(DeviceKind::cpu)[MemoryCategory::activation].peak;
  });
  return peak;
}

TEST(PpMemory, FirstStageHoldsWhatTheScheduleKeepsInFlight) {
  const int m = 8;
  const double one = static_cast<double>(first_stage_peak("gpipe", 1));
  // What the first stage holds beyond one micro-batch: GPipe keeps all m, 1F1B and ZB-H1 p.
  const double gpipe = first_stage_peak("gpipe", m) - one;
  const double gpipe_two = first_stage_peak("gpipe", 2) - one;
  ASSERT_GT(gpipe_two, 0);
  // The moment of the peak within the schedule differs by up to a boundary activation or two
  // (2 sequences x 12 tokens x d = 24, fp32).
  const double slack = 2.0 * 4 * 2 * 12 * 24;
  EXPECT_GE(gpipe, (m - 1) * gpipe_two - slack) << "GPipe holds all " << m << " micro-batches";
  const double per_micro_batch = gpipe / (m - 1);
  EXPECT_LE(first_stage_peak("1f1b", m) - one, (kRanks - 1) * per_micro_batch + slack)
      << "1F1B holds at most p = " << kRanks << " micro-batches";
  // ZB-H1 holds as many, plus what each deferred W keeps between its I and itself (the gradients
  // of the linears' outputs): less than one more micro-batch.
  EXPECT_LE(first_stage_peak("zb-h1", m) - one, kRanks * per_micro_batch + slack)
      << "ZB-H1 holds at most p = " << kRanks << " micro-batches and the deferred W inputs";
}

}  // namespace
}  // namespace meshtrain::testing

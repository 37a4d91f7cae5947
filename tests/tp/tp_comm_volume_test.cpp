// Bytes moved per step and rank by tensor parallelism, from the communicators' counters, against
// Megatron's closed forms. Per micro-batch of R token rows and width d, every block all-reduces
// [R, d] twice forward (after each row-parallel linear) and twice backward (the input gradients
// of the column-parallel linears); the vocab-parallel embedding adds one forward, the tied head
// one backward, and the vocab-parallel loss three [R] vectors: O(R), never O(R * V). Sequence
// parallelism swaps each all-reduce for an all-gather plus a reduce-scatter (the same bytes) and
// adds the sums of the LayerNorm and wpe gradients over tp.
#include <gtest/gtest.h>

#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/shard_math.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// What the communicators count (meshtrain/core/comm/communicator.cpp): per call of B bytes on t ranks.
uint64_t all_reduce(uint64_t bytes, int64_t t) { return 2 * bytes * (t - 1) / t; }

// Bytes one tp rank sends per micro-batch of `rows` token rows of `seq` tokens.
uint64_t tp_bytes(const GPT2Config& m, int64_t t, int64_t rows, int64_t seq, bool sp) {
  const uint64_t d = m.dim, hidden = 4 * rows * d, loss = all_reduce(4 * rows, t) +
                                                           all_reduce(8 * rows, t);
  if (!sp) return (4 * m.layers + 2) * all_reduce(hidden, t) + loss;
  const uint64_t gather_or_scatter = hidden / t * (t - 1);
  const uint64_t layer_norms = (2 * m.layers + 1) * all_reduce(4 * 2 * d, t);
  const uint64_t wpe = all_reduce(4 * seq * d, t);
  return (8 * m.layers + 4) * gather_or_scatter + layer_norms + wpe + loss;
}

struct Case {
  int tp;
  bool sp;
  int64_t grad_accum;
};

class TpCommVolume : public ::testing::TestWithParam<Case> {};

TEST_P(TpCommVolume, MatchesMegatronPerMicroBatch) {
  const Case& k = GetParam();
  TrainConfig c = uneven_config();
  c.steps = 1;
  c.world = k.tp;
  c.mesh = parse_mesh_spec("tp=" + std::to_string(k.tp));
  c.grad_accum = k.grad_accum;
  if (k.sp) c.set("tp", "sequence_parallel", "true");
  const int64_t rows = c.batch / k.grad_accum * c.seq;
  EXPECT_EQ(run_on_mesh(c).metrics.at(0).comm_bytes,
            k.grad_accum * tp_bytes(gpt2_config(*c.model), k.tp, rows, c.seq, k.sp));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TpCommVolume,
                         ::testing::Values(Case{2, false, 1}, Case{2, true, 1}, Case{4, false, 1},
                                           Case{4, true, 1}, Case{2, true, 2}),
                         [](const auto& info) {
                           const Case& k = info.param;
                           return "tp" + std::to_string(k.tp) + (k.sp ? "_sp" : "") + "_accum" +
                                  std::to_string(k.grad_accum);
                         });

// Under FSDP x TP each rank's tp group moves the same bytes for its data rank's rows, and FSDP
// all-gathers and reduce-scatters the TP-local pieces: ZeRO-3's volume over those sizes (the
// root unit holds this tp rank's vocabulary rows, so it differs by tp rank).
TEST(TpCommVolume, FsdpShardsTheTpLocalPieces) {
  TrainConfig c = uneven_config();
  c.steps = 1;
  c.world = 4;
  c.mesh = parse_mesh_spec("dp_shard=2,tp=2");
  const GPT2Config m = gpt2_config(*c.model);
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    trainer.step();
    const int t = 2, w = 2;
    const int64_t rows = c.batch / w * c.seq;
    EXPECT_EQ(trainer.mesh().comm(mesh_axis::tp).counters().total_sent(),
              tp_bytes(m, t, rows, c.seq, false));

    const int64_t d = m.dim, tp_rank = trainer.mesh().axis_rank(mesh_axis::tp);
    const auto padded = [&](int64_t r, int64_t row_numel) { return (r + w - 1) / w * row_numel; };
    const int64_t vocab_rows = shard_range(m.vocab, t, static_cast<int>(tp_rank)).size;
    const int64_t root = padded(vocab_rows, d) + padded(m.ctx, d) + 2 * padded(d, 1);
    const int64_t block = 4 * padded(d, 1) + padded(d, 3 * d / t) + padded(3 * d / t, 1) +
                          padded(d / t, d) + 2 * padded(d, 1) + padded(d, 4 * d / t) +
                          padded(4 * d / t, 1) + padded(4 * d / t, d);
    // Forward gathers every unit, backward gathers the blocks again (the root stays unsharded),
    // and every unit's gradients are reduce-scattered once: (w - 1) padded shards each.
    const uint64_t expected = 4 * (w - 1) * (2 * root + 3 * m.layers * block);
    const auto* fsdp = dynamic_cast<const FsdpStrategy*>(trainer.plan().find("fsdp"));
    EXPECT_EQ(fsdp->counters().total_sent(), expected) << "tp rank " << tp_rank;
  });
}

}  // namespace
}  // namespace meshtrain::testing

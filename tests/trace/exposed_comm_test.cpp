// Proof that FSDP's prefetch hides communication. The local backend's delay hook makes every
// all-gather and reduce-scatter take `delay` longer to complete (on the progress thread: the
// caller is not held up), with the delay below one block's forward compute. Trained with FSDP
// full on 2 ranks, the time the compute thread is blocked on FSDP's collectives (the trace's wait
// spans on dp_shard) must then stay well below the collectives' total time with prefetch, and be
// most of it without. The trace shows why: unit k+1's all-gather runs while unit k computes. The
// trace's wait spans of every group are the time comm_wait_seconds() counts.
//
// Robust on a loaded machine: the delay is set from the block's measured forward time (half of
// it, within 5-40 ms), and each bound holds with a wide margin (docs/tracing.md has the figures).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/trace/recorder.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using std::chrono::microseconds;

constexpr int kBlocks = 6;

TrainConfig delay_config() {
  // A small GPT-2 whose blocks compute for tens of milliseconds: d = 256, 6 blocks, 1024 tokens
  // per rank and step.
  TrainConfig c =
      small_config(GPT2Config{256, 64, 256, kBlocks, 4}, synthetic_token_file(256, 8192));
  c.world = 2;
  c.batch = 32;
  c.seq = 64;
  c.set("fsdp", "mode", "full");
  return c;
}

struct Measured {
  microseconds delay{0};
  double exposed_s = 0;            // the trace's waits on dp_shard ops, mean over ranks: FSDP's
  double all_wait_span_s = 0;      // the trace's waits on every group, mean over ranks
  double comm_wait_s = 0;          // comm_wait_seconds() over the same steps, mean over ranks
  int64_t delayed_ops = 0;         // all-gathers and reduce-scatters on dp_shard per rank
  double forward_block_ms = 0;     // median forward time of a block in the warm-up step (rank 0)
  std::vector<trace::Span> spans;  // rank 0's, over the measured steps
  std::vector<std::string> tracks;

  // Each op takes at least the delay, and a group's ops run one after another on its progress
  // thread: the collectives' total time is at least ops x delay.
  double total_s() const {
    return static_cast<double>(delayed_ops) * 1e-6 * static_cast<double>(delay.count());
  }
};

double median_block_forward_ms(const trace::Recorder& recorder) {
  std::vector<double> ms;
  for (const trace::Span& s : recorder.spans())
    if (s.kind == trace::Kind::layer && s.name.rfind("forward h.", 0) == 0)
      ms.push_back(1e-6 * static_cast<double>(s.end_ns - s.begin_ns));
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

// Trains one warm-up step, traced, from which rank 0 sets the delay of every all-gather and
// reduce-scatter of the dp_shard group (for all its ranks) to 0.4 of a block's forward time,
// within [8, 40] ms; then `steps` steps with the delay and a recorder bound on each rank.
Measured run(int prefetch, int steps) {
  TrainConfig c = delay_config();
  c.set("fsdp", "prefetch", std::to_string(prefetch));
  Measured m;
  std::mutex mutex;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    Communicator& dp = trainer.mesh().comm("dp_shard");
    {
      trace::Recorder warm_up(trainer.rank());
      const trace::Bind bind(&warm_up);
      trainer.step();
      if (trainer.rank() == 0) {
        // Rank 1's next ops cannot complete before rank 0 arrives, which is after this.
        m.forward_block_ms = median_block_forward_ms(warm_up);
        m.delay = microseconds(
            static_cast<int64_t>(1e3 * std::clamp(0.4 * m.forward_block_ms, 8.0, 40.0)));
        set_local_op_delay(dp, CommOp::all_gather, m.delay);
        set_local_op_delay(dp, CommOp::reduce_scatter, m.delay);
      }
    }
    auto recorder = std::make_shared<trace::Recorder>(trainer.rank());
    const double waited_before = comm_wait_seconds();
    const CommCounters before = dp.counters();
    {
      const trace::Bind bind(recorder.get());
      for (int s = 0; s < steps; ++s) trainer.step();
    }
    const double waited = comm_wait_seconds() - waited_before;
    const CommCounters after = dp.counters();
    double fsdp_waits = 0, all_waits = 0;
    for (const trace::Span& s : recorder->spans()) {
      if (s.kind != trace::Kind::wait) continue;
      const double seconds = 1e-9 * static_cast<double>(s.end_ns - s.begin_ns);
      all_waits += seconds;
      if (!s.args.empty() && s.args[0].second.find("group 'dp_shard'") != std::string::npos)
        fsdp_waits += seconds;
    }
    std::lock_guard lock(mutex);
    m.exposed_s += fsdp_waits / c.world;
    m.all_wait_span_s += all_waits / c.world;
    m.comm_wait_s += waited / c.world;
    m.delayed_ops = static_cast<int64_t>(
        after.count(CommOp::all_gather) - before.count(CommOp::all_gather) +
        after.count(CommOp::reduce_scatter) - before.count(CommOp::reduce_scatter));
    if (trainer.rank() == 0) {
      m.spans = recorder->spans();
      m.tracks = recorder->track_names();
    }
  });
  return m;
}

void report(const char* what, const Measured& m) {
  std::printf(
      "[ %-11s ] block forward %.1f ms; %lld delayed collectives x %.1f ms = %.1f ms of "
      "communication; exposed %.1f ms (%.0f%%); all waits %.1f ms\n",
      what, m.forward_block_ms, static_cast<long long>(m.delayed_ops),
      1e-3 * static_cast<double>(m.delay.count()), 1e3 * m.total_s(), 1e3 * m.exposed_s,
      100.0 * m.exposed_s / m.total_s(), 1e3 * m.comm_wait_s);
}

TEST(ExposedComm, PrefetchHidesMostCommunicationAndNoPrefetchExposesIt) {
  constexpr int kSteps = 2;
  const Measured hidden = run(2, kSteps);
  const Measured exposed = run(0, kSteps);
  report("prefetch 2", hidden);
  report("prefetch 0", exposed);
  // Per step: an all-gather per unit forward (the root and each block), again for each block in
  // backward, and a reduce-scatter per unit.
  ASSERT_EQ(hidden.delayed_ops, kSteps * (3 * kBlocks + 2));
  ASSERT_EQ(exposed.delayed_ops, hidden.delayed_ops);
  // With prefetch only the step's edges stay exposed (the root's all-gather and the one queued
  // behind it, the first block of backward, the last two reduce-scatters): about 5 of the 20
  // delays of a step.
  EXPECT_LT(hidden.exposed_s, 0.5 * hidden.total_s()) << "prefetch no longer hides the all-gathers";
  // Without it every all-gather is issued where it is waited for: at least 2L + 1 = 13 of 20.
  EXPECT_GT(exposed.exposed_s, 0.5 * exposed.total_s());
  EXPECT_GT(exposed.exposed_s / exposed.total_s(), 1.5 * hidden.exposed_s / hidden.total_s());
  // The trace's wait spans are the blocked time comm_wait_seconds() counts (exposed_comm_s).
  for (const Measured* m : {&hidden, &exposed}) {
    EXPECT_NEAR(m->all_wait_span_s, m->comm_wait_s, 0.05 * m->comm_wait_s + 2e-3);
    EXPECT_GE(m->comm_wait_s + 2e-3, m->exposed_s);
  }
}

// The spans named `name` of `kind` on rank 0, in order.
std::vector<trace::Span> named(const Measured& m, trace::Kind kind, const std::string& name) {
  std::vector<trace::Span> out;
  for (const trace::Span& s : m.spans)
    if (s.kind == kind && s.name == name) out.push_back(s);
  return out;
}

bool overlap(const trace::Span& a, const trace::Span& b) {
  return a.begin_ns < b.end_ns && b.begin_ns < a.end_ns;
}

TEST(ExposedComm, TheTraceShowsTheNextUnitsAllGatherDuringThisUnitsForward) {
  // One all-gather in flight: unit k + 1's is issued as unit k starts, and runs beside it.
  const Measured one = run(1, 1);
  // None: unit k + 1's all-gather starts after unit k's forward, and is waited for at once.
  const Measured none = run(0, 1);
  for (int k = 0; k + 1 < kBlocks; ++k) {
    SCOPED_TRACE("block " + std::to_string(k));
    const std::string block = "h." + std::to_string(k), next = "h." + std::to_string(k + 1);
    for (const Measured* m : {&one, &none}) {
      ASSERT_EQ(named(*m, trace::Kind::layer, "forward " + block).size(), 1u);
      // Forward and backward gathers: the first is the forward's.
      ASSERT_EQ(named(*m, trace::Kind::comm, "all_gather " + next).size(), 2u);
    }
    const trace::Span gather = named(one, trace::Kind::comm, "all_gather " + next)[0];
    const trace::Span forward = named(one, trace::Kind::layer, "forward " + block)[0];
    EXPECT_TRUE(overlap(gather, forward)) << "prefetch: the all-gather must run during the forward";
    EXPECT_EQ(one.tracks.at(gather.track).rfind("comm dp_shard", 0), 0u);
    const trace::Span late = named(none, trace::Kind::comm, "all_gather " + next)[0];
    const trace::Span compute = named(none, trace::Kind::layer, "forward " + block)[0];
    EXPECT_FALSE(overlap(late, compute));
    EXPECT_GE(late.begin_ns, compute.end_ns);
    // ... it takes at least the delay, and the compute thread waits for it: exposed time.
    EXPECT_GE(late.end_ns - late.begin_ns, 1000 * none.delay.count());
    const auto waits = named(none, trace::Kind::wait, "wait all_gather " + next);
    ASSERT_GE(waits.size(), 1u);
    EXPECT_GE(waits[0].end_ns, late.end_ns) << "the op completes before its waiter wakes";
    EXPECT_GE(waits[0].end_ns - waits[0].begin_ns, 500 * none.delay.count());
  }
}

// The step's exposed figure (StepMetrics::exposed_comm_s) counts every wait on communication, not
// FSDP's alone: tensor parallelism waits for its all-reduces where it issues them, so each delayed
// one is exposed whole on every rank.
TEST(ExposedComm, StepMetricsCountTensorParallelWaits) {
  TrainConfig c = small_config(GPT2Config{64, 16, 32, 2, 4}, synthetic_token_file(64, 4096));
  c.world = 2;
  c.mesh = parse_mesh_spec("tp=2");
  const microseconds delay(4000);
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    Communicator& tp = trainer.mesh().comm("tp");
    trainer.step();
    // Rank 1's next all-reduce cannot complete before rank 0 arrives, which is after this.
    if (trainer.rank() == 0) set_local_op_delay(tp, CommOp::all_reduce, delay);
    const uint64_t before = tp.counters().count(CommOp::all_reduce);
    const StepMetrics m = trainer.step();
    const uint64_t delayed = tp.counters().count(CommOp::all_reduce) - before;
    ASSERT_GT(delayed, 0u);
    EXPECT_GE(m.exposed_comm_s, 0.9e-6 * static_cast<double>(delayed * delay.count()))
        << delayed << " all-reduces delayed by " << delay.count() << " us";
    EXPECT_LT(m.exposed_comm_s, m.step_time_s);
  });
}

}  // namespace
}  // namespace meshtrain::testing

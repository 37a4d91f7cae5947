// The trace recorder (meshtrain/core/trace/recorder.h) and what the communication layer records into it:
// comm spans from issue to completion on well-nested tracks, wait spans only while blocked, and
// the local backend's delay hook, which holds back completion but never the caller.
#include "meshtrain/core/trace/recorder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "meshtrain/core/comm/local/local_world.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"

namespace meshtrain {
namespace {

using namespace std::chrono_literals;

std::vector<trace::Span> spans_of(const trace::Recorder& r, trace::Kind kind) {
  std::vector<trace::Span> out;
  for (const trace::Span& s : r.spans())
    if (s.kind == kind) out.push_back(s);
  return out;
}

TEST(TraceRecorder, NothingIsRecordedWithoutABoundRecorder) {
  auto recorder = std::make_shared<trace::Recorder>(0);
  EXPECT_EQ(trace::current(), nullptr);
  bool named = false;
  {
    trace::Scope span(trace::Kind::layer, [&] {
      named = true;
      return std::string("forward h.0");
    });
  }
  EXPECT_FALSE(named) << "the name is built only when tracing";
  EXPECT_TRUE(recorder->spans().empty());
  {
    const trace::Bind bind(recorder.get());
    EXPECT_EQ(trace::current(), recorder.get());
    trace::Scope span(trace::Kind::kernel, "linear_forward");
    span.arg("rows", "4");
  }
  EXPECT_EQ(trace::current(), nullptr);
  const auto spans = recorder->spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "linear_forward");
  EXPECT_EQ(spans[0].kind, trace::Kind::kernel);
  EXPECT_EQ(spans[0].track, trace::Recorder::kComputeTrack);
  EXPECT_LE(spans[0].begin_ns, spans[0].end_ns);
  EXPECT_EQ(spans[0].args.size(), 1u);
  const auto totals = recorder->totals();
  EXPECT_EQ((totals.at({trace::Kind::kernel, "linear_forward"}).calls), 1);
}

TEST(TraceRecorder, ProfileOnlyKeepsTotalsNotSpans) {
  auto recorder = std::make_shared<trace::Recorder>(3, trace::RecorderOptions{.keep_spans = false});
  const trace::Bind bind(recorder.get());
  for (int i = 0; i < 5; ++i) trace::Scope span(trace::Kind::kernel, "gelu_forward");
  EXPECT_TRUE(recorder->spans().empty());
  EXPECT_EQ((recorder->totals().at({trace::Kind::kernel, "gelu_forward"}).calls), 5);
}

// Checkpoints between steps are traced but not profiled.
TEST(TraceRecorder, WhileNotCountingSpansAreKeptButNotTotalled) {
  auto recorder = std::make_shared<trace::Recorder>(0);
  const trace::Bind bind(recorder.get());
  { trace::Scope span(trace::Kind::kernel, "gelu_forward"); }
  recorder->set_counting(false);
  { trace::Scope span(trace::Kind::kernel, "gelu_forward"); }
  trace::Span op;
  op.name = "all_gather";
  op.end_ns = 5;
  recorder->record_comm("dp_shard", op);
  recorder->set_counting(true);
  EXPECT_EQ(recorder->spans().size(), 3u);
  EXPECT_EQ((recorder->totals().at({trace::Kind::kernel, "gelu_forward"}).calls), 1);
  EXPECT_EQ(recorder->totals().count({trace::Kind::comm, "all_gather"}), 0u);
  EXPECT_EQ(recorder->comm_busy_ns("dp_shard"), 0);
}

TEST(TraceRecorder, OverlappingCommSpansGoToFurtherLanesSoEveryTrackNests) {
  trace::Recorder recorder(0);
  const auto comm = [&](int64_t b, int64_t e) {
    trace::Span s;
    s.name = "all_gather";
    s.begin_ns = b;
    s.end_ns = e;
    recorder.record_comm("dp_shard", s);
  };
  comm(0, 10);
  comm(5, 20);   // in flight with the first: lane 2
  comm(12, 30);  // the first lane is free again
  comm(2, 4);    // completes late but began early: never on a lane that has a later span
  const auto names = recorder.track_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[1], "comm dp_shard");
  EXPECT_EQ(names[2], "comm dp_shard #2");
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> by_track;
  for (const trace::Span& s : recorder.spans()) by_track[s.track].push_back({s.begin_ns, s.end_ns});
  for (auto& [track, spans] : by_track) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "track " << names[track];
  }
  EXPECT_EQ(recorder.comm_busy_ns("dp_shard"), 30);
  EXPECT_EQ(recorder.comm_busy_ns(), 30);
  EXPECT_EQ(recorder.comm_busy_ns("tp"), 0);
}

TEST(TraceRecorder, IsThreadSafe) {
  trace::Recorder recorder(0);
  std::vector<std::thread> threads;
  const std::vector<std::string> groups = {"g0", "g1", "g2", "g3"};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        trace::Span s;
        s.name = "op";
        s.begin_ns = i;
        s.end_ns = i + 1;
        if (t % 2)
          recorder.record_comm(groups[t], s);
        else
          recorder.record(s);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(recorder.spans().size(), 4000u);
}

TEST(TraceRecorder, BoundsTheSpansItKeeps) {
  trace::Recorder recorder(0, trace::RecorderOptions{.keep_spans = true, .max_spans = 3});
  for (int i = 0; i < 5; ++i)
    recorder.record(trace::Span{"x", trace::Kind::kernel, 0, i, i + 1, {}});
  EXPECT_EQ(recorder.spans().size(), 3u);
  EXPECT_EQ(recorder.dropped_spans(), 2u);
  EXPECT_EQ((recorder.totals().at({trace::Kind::kernel, "x"}).calls), 5);
}

// Two ranks; rank r's recorder bound to its thread. The all-reduce is held back by the delay hook.
TEST(TraceComm, CollectivesAreSpansFromIssueToCompletionAndWaitsOnlyWhileBlocked) {
  constexpr auto kDelay = 60ms;
  std::vector<std::shared_ptr<trace::Recorder>> recorders = {std::make_shared<trace::Recorder>(0),
                                                             std::make_shared<trace::Recorder>(1)};
  std::vector<double> issue_ms(2), wait_ms(2);
  spawn_ranks(2, [&](RankContext& ctx) {
    const trace::Bind bind(recorders[ctx.rank].get());
    set_local_op_delay(ctx.world, CommOp::all_reduce, kDelay);
    const Tensor buffer = Tensor::from_vector(std::vector<float>{1.f, 2.f}, {2});
    const auto t0 = std::chrono::steady_clock::now();
    WorkPtr work;
    {
      const std::string label = "unit";
      const trace::CommLabel named(label);
      work = ctx.world.all_reduce(buffer, ReduceOp::sum);
    }
    const auto t1 = std::chrono::steady_clock::now();
    work->wait();
    const auto t2 = std::chrono::steady_clock::now();
    issue_ms[ctx.rank] = std::chrono::duration<double, std::milli>(t1 - t0).count();
    wait_ms[ctx.rank] = std::chrono::duration<double, std::milli>(t2 - t1).count();
    EXPECT_EQ(buffer.to_vector(), (std::vector<float>{2.f, 4.f}));
    work->wait();  // already complete: no second wait span
    set_local_op_delay(ctx.world, CommOp::all_reduce, 0ms);
    ctx.world.barrier()->wait();
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_LT(issue_ms[r], 30.0) << "the delay must hold back completion, not the caller";
    EXPECT_GE(wait_ms[r], 55.0);
    const auto comm = spans_of(*recorders[r], trace::Kind::comm);
    ASSERT_GE(comm.size(), 1u);
    EXPECT_EQ(comm[0].name, "all_reduce unit");
    EXPECT_EQ(recorders[r]->track_names().at(comm[0].track), "comm world");
    EXPECT_GE(comm[0].end_ns - comm[0].begin_ns, 55'000'000);
    const auto waits = spans_of(*recorders[r], trace::Kind::wait);
    ASSERT_GE(waits.size(), 1u);
    EXPECT_EQ(waits[0].name, "wait all_reduce unit");
    EXPECT_EQ(waits[0].track, trace::Recorder::kComputeTrack);
    EXPECT_GE(waits[0].begin_ns, comm[0].begin_ns);
    EXPECT_GE(waits[0].end_ns, comm[0].end_ns) << "the op completes before its waiter wakes";
    EXPECT_GE(waits[0].end_ns - waits[0].begin_ns, 50'000'000);
    // The all-reduce waited for once while blocked; the barrier perhaps, never the second wait.
    int reduce_waits = 0;
    for (const auto& w : waits) reduce_waits += w.name == "wait all_reduce unit";
    EXPECT_EQ(reduce_waits, 1);
  }
}

TEST(TraceComm, OpsThatCompleteBeforeTheyAreTaggedAreRecordedOnce) {
  auto recorder = std::make_shared<trace::Recorder>(0);
  spawn_ranks(2, [&](RankContext& ctx) {
    std::optional<trace::Bind> bind;
    if (ctx.rank == 0) bind.emplace(recorder.get());
    const Tensor buffer = Tensor::zeros({1024}, DType::f32);
    std::vector<WorkPtr> works;
    for (int i = 0; i < 200; ++i) works.push_back(ctx.world.all_reduce(buffer, ReduceOp::sum));
    for (const WorkPtr& w : works) w->wait();
  });
  EXPECT_EQ(spans_of(*recorder, trace::Kind::comm).size(), 200u);
}

TEST(TraceComm, TheDelayHookNeedsALocalCommunicator) {
  // Any non-local communicator would do; the local one accepts it and refuses negatives.
  spawn_ranks(1, [](RankContext& ctx) {
    EXPECT_THROW(set_local_op_delay(ctx.world, CommOp::all_gather, -1ms), InvalidArgument);
    set_local_op_delay(ctx.world, CommOp::all_gather, 0ms);
  });
}

}  // namespace
}  // namespace meshtrain

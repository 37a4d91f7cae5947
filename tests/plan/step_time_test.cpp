// The step-time model (meshtrain/plan/step_time.h) on counts written by hand, where every term
// has a closed form: kernels at the profile's roofline, tp's traffic exposed, the data axes'
// hidden behind compute, intra- against inter-node links, and a pipeline's makespan and bubble as
// the schedules' closed forms give them; then on replays of real layouts.
#include "meshtrain/plan/step_time.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "meshtrain/plugins/pp/schedule_generators.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

// Round figures: 1 GFLOP/s GEMMs, 1 GB/s memory, links of 0.1 GB/s in a node and 0.01 across.
MachineProfile round_machine(int devices_per_node = 8) {
  return {.name = "round",
          .dense_peak_flops_f32 = 2e9,
          .dense_peak_flops_bf16 = 4e9,
          .gemm_efficiency = 0.5,
          .memory_bandwidth = 1e9,
          .intra_node_bandwidth = 1e8,
          .inter_node_bandwidth = 1e7,
          .intra_node_latency = 1e-3,
          .inter_node_latency = 1e-2,
          .devices_per_node = devices_per_node,
          .device_memory = 1e10};
}

// Traffic on a group: `bytes` sent in `calls` calls of `kind`.
std::pair<std::string, CommCounters> traffic_of(const std::string& group, uint64_t bytes,
                                                uint64_t calls, CommOp kind = CommOp::all_gather) {
  CommCounters c;
  c.bytes_sent[static_cast<size_t>(kind)] = bytes;
  c.calls[static_cast<size_t>(kind)] = calls;
  return {group, c};
}

// A rank whose kernels take `seconds` on round_machine (GEMM-bound) and whose groups sent
// `sent` bytes in `calls` all-gathers each.
ReplayedRank rank_of(double seconds,
                     std::vector<std::tuple<std::string, uint64_t, uint64_t>> traffic = {}) {
  ReplayedRank r;
  r.kernels.add("matmul", seconds * 1e9, 1.0);
  for (const auto& [group, bytes, calls] : traffic)
    r.traffic.push_back(traffic_of(group, bytes, calls));
  return r;
}

PlanLayout layout_of(const std::string& mesh) { return {.mesh = parse_mesh_spec(mesh)}; }

// Each rank its own replay.
RankReplays each(std::vector<ReplayedRank> ranks) { return RankReplays(std::move(ranks)); }

TEST(StepTime, KernelsAtTheRooflineOfEachOp) {
  ReplayedRank r;
  r.traffic = {traffic_of("dp_shard", 0, 0), traffic_of("dp", 0, 0)};
  r.kernels.add("matmul", 2e9, 1e6);  // 2 s of GEMM, its bytes hidden under it
  r.kernels.add("add", 0, 5e8);       // 0.5 s of memory traffic
  const StepTimePrediction p = predict_step_time(layout_of("dp_shard=1"), {}, each({r}), round_machine());
  EXPECT_DOUBLE_EQ(p.step, 2.5);
  EXPECT_DOUBLE_EQ(p.ranks[0].compute, 2.5);
}

TEST(StepTime, TensorParallelTrafficIsExposed) {
  const auto tp = rank_of(1.0, {{"tp", 100'000'000, 10}, {"dp", 0, 0}});
  const StepTimePrediction p = predict_step_time(layout_of("tp=2"), {}, each({tp, tp}), round_machine());
  EXPECT_DOUBLE_EQ(p.ranks[1].exposed_comm[0].second, 1.0 + 10 * 1e-3);
  EXPECT_DOUBLE_EQ(p.step, 2.01);
  // A node of one device: the tp group crosses nodes.
  const StepTimePrediction apart =
      predict_step_time(layout_of("tp=2"), {}, each({tp, tp}), round_machine(1));
  EXPECT_DOUBLE_EQ(apart.step, 1.0 + 10.0 + 10 * 1e-2);
}

TEST(StepTime, DataParallelTrafficHidesBehindCompute) {
  // 3 s of FSDP traffic against 1 s of kernels: 2 s exposed; 0.5 s would be hidden whole.
  const auto heavy = rank_of(1.0, {{"dp_shard", 0, 0}, {"dp", 300'000'000, 0}});
  StepTimePrediction p =
      predict_step_time(layout_of("dp_shard=2"), {}, each({heavy, heavy}), round_machine());
  EXPECT_DOUBLE_EQ(p.ranks[0].exposed_comm[1].second, 2.0);
  EXPECT_DOUBLE_EQ(p.step, 3.0);
  const auto light = rank_of(1.0, {{"dp_shard", 0, 0}, {"dp", 50'000'000, 0}});
  p = predict_step_time(layout_of("dp_shard=2"), {}, each({light, light}), round_machine());
  EXPECT_DOUBLE_EQ(p.ranks[0].total_exposed_comm(), 0.0);
  EXPECT_DOUBLE_EQ(p.step, 1.0);
}

// Four one-thread ranks on a node of two cores: each computes at half speed; two to a node, each
// on a core of its own.
TEST(StepTime, RanksSharingCoresStretchTheirKernels) {
  MachineProfile shared = round_machine();
  shared.cores = 2;
  const auto one = rank_of(1.0, {{"dp_shard", 0, 0}, {"dp", 0, 0}});
  const RankReplays four = each(std::vector<ReplayedRank>(4, one));
  EXPECT_DOUBLE_EQ(predict_step_time(layout_of("dp_shard=4"), {}, four, shared).step, 2.0);
  shared.threads_per_rank = 2;
  EXPECT_DOUBLE_EQ(predict_step_time(layout_of("dp_shard=4"), {}, four, shared).step, 4.0);
  shared.devices_per_node = 2;
  shared.threads_per_rank = 1;
  EXPECT_DOUBLE_EQ(predict_step_time(layout_of("dp_shard=4"), {}, four, shared).step, 1.0);
  // Ranks that put only half of the cores to use (the scheduler's tails where they meet).
  shared.devices_per_node = 8;
  shared.shared_core_efficiency = 0.5;
  EXPECT_DOUBLE_EQ(predict_step_time(layout_of("dp_shard=4"), {}, four, shared).step, 4.0);
}

// Measured collectives by group size replace the intra-node link: a tp pair takes the fit of 2,
// a group of 3 the largest measured below it (2), one of 8 the largest (4); the inter-node link
// stays the profile's.
TEST(StepTime, CollectivesTakeTheFitOfTheirGroupSize) {
  MachineProfile measured = round_machine();
  measured.collectives[CommOp::all_gather][2] = {2e-3, 1e-9};  // 2 ms a call, 1 GB/s
  measured.collectives[CommOp::all_gather][4] = {5e-3, 1e-8};
  const auto traffic = [](const std::string& group) {
    return rank_of(1.0, {{group, 100'000'000, 10}, {"dp", 0, 0}});
  };
  const auto exposed = [&](const std::string& mesh, const std::string& group, int nodes_of) {
    MachineProfile m = measured;
    m.devices_per_node = nodes_of;
    const PlanLayout layout = layout_of(mesh);
    return predict_step_time(layout, {},
                             each(std::vector<ReplayedRank>(layout.mesh.size(), traffic(group))), m)
        .ranks[0]
        .exposed_comm[0]
        .second;
  };
  EXPECT_DOUBLE_EQ(exposed("tp=2", "tp", 8), 10 * 2e-3 + 0.1);
  EXPECT_DOUBLE_EQ(exposed("tp=3", "tp", 8), 10 * 2e-3 + 0.1);
  EXPECT_DOUBLE_EQ(exposed("tp=8", "tp", 8), 10 * 5e-3 + 1.0);
  EXPECT_DOUBLE_EQ(exposed("tp=2", "tp", 1), 10 * 1e-2 + 10.0);  // across nodes: the link's
}

// Each kind of call on a group takes its kind's fit, and a kind the profile did not measure the
// intra-node link's figures (round_machine: 1 ms a call, 1e8 B/s).
TEST(StepTime, EachKindOfCollectiveTakesItsOwnFit) {
  MachineProfile measured = round_machine();
  measured.collectives[CommOp::all_reduce][2] = {2e-3, 1e-9};
  measured.collectives[CommOp::reduce_scatter][2] = {4e-3, 2e-9};
  ReplayedRank r = rank_of(1.0);
  CommCounters tp = traffic_of("tp", 0, 0).second;
  const auto add = [&](CommOp kind, uint64_t bytes, uint64_t calls) {
    tp.bytes_sent[static_cast<size_t>(kind)] += bytes;
    tp.calls[static_cast<size_t>(kind)] += calls;
  };
  add(CommOp::all_reduce, 1'000'000, 10);
  add(CommOp::reduce_scatter, 1'000'000, 5);
  add(CommOp::all_to_all, 1'000'000, 1);
  r.traffic = {{"tp", tp}, traffic_of("dp", 0, 0)};
  const double exposed = predict_step_time(layout_of("tp=2"), {}, each({r, r}), measured)
                             .ranks[0]
                             .exposed_comm[0]
                             .second;
  EXPECT_DOUBLE_EQ(exposed, (10 * 2e-3 + 1e-3) + (5 * 4e-3 + 2e-3) + (1e-3 + 1e-2));
}

// A calibrated profile's host work per kernel call adds to every call, scheduled or not.
TEST(StepTime, EveryKernelCallCarriesTheHostsWork) {
  MachineProfile hosted = round_machine();
  hosted.host_per_call = 1e-3;
  ReplayedRank r = rank_of(1.0, {{"dp_shard", 0, 0}, {"dp", 0, 0}});
  r.kernels.add("add", 0, 0);
  r.kernels.add("add", 0, 0);
  const StepTimePrediction p = predict_step_time(layout_of("dp_shard=1"), {}, each({r}), hosted);
  EXPECT_DOUBLE_EQ(p.step, 1.0 + 3 * 1e-3);
}

// The cores' bound adds the most exposed communication of a node's ranks to their kernels'
// thread-seconds over its cores, node by node: four ranks of 1 s of kernels on two cores, rank 0
// with 0.5 s of tp traffic and the others 0.1 s, take 4 / 2 + 0.5 s; as two tp pairs on nodes of
// one core each, the second's ranks computing 2 s, node 1 sets the step at 4 / 1 + 0.1 s.
TEST(StepTime, TheCoresBoundAddsANodesMostExposedCommunication) {
  MachineProfile shared = round_machine();
  shared.cores = 2;
  const auto rank = [](double kernels, uint64_t tp_bytes) {
    return rank_of(kernels, {{"tp", tp_bytes, 0}, {"dp", 0, 0}});
  };
  StepTimePrediction p = predict_step_time(
      layout_of("tp=4"), {},
      each({rank(1, 50'000'000), rank(1, 10'000'000), rank(1, 10'000'000), rank(1, 10'000'000)}),
      shared);
  EXPECT_DOUBLE_EQ(p.step, 2.5);
  EXPECT_DOUBLE_EQ(p.ranks[0].cores_wait, 1.0);
  EXPECT_DOUBLE_EQ(p.ranks[1].cores_wait, 1.4);
  shared.cores = 1;
  shared.devices_per_node = 2;  // each tp pair a node of its own
  p = predict_step_time(
      layout_of("dp_shard=2,tp=2"), {},
      each({rank(1, 50'000'000), rank(1, 10'000'000), rank(2, 10'000'000), rank(2, 10'000'000)}),
      shared);
  EXPECT_DOUBLE_EQ(p.step, 4.1);
  EXPECT_EQ(p.slowest, 2);
  EXPECT_DOUBLE_EQ(p.ranks[0].cores_wait, 1.0);  // own 1.5 s, node 0 bound at 2 / 1 + 0.5
}

TEST(StepTime, TheSlowestRankSetsTheStep) {
  const StepTimePrediction p = predict_step_time(
      layout_of("tp=2"), {},
      each({rank_of(1.0, {{"tp", 0, 0}, {"dp", 0, 0}}), rank_of(1.5, {{"tp", 0, 0}, {"dp", 0, 0}})}),
      round_machine());
  EXPECT_EQ(p.slowest, 1);
  EXPECT_DOUBLE_EQ(p.step, 1.5);
}

// Each pp rank's computations as the schedule runs them, F taking `forward` seconds and B
// `backward`, plus `after` seconds outside the schedule (the optimizer).
std::vector<ReplayedRank> pipeline_ranks(const Schedule& schedule, double forward, double backward,
                                         double after) {
  std::vector<ReplayedRank> ranks(static_cast<size_t>(schedule.ranks));
  for (int r = 0; r < schedule.ranks; ++r) {
    ReplayedRank& rank = ranks[r];
    rank.traffic = {traffic_of("pp", 0, 0), traffic_of("dp", 0, 0)};
    rank.kernels.add("adamw_step", 0, after * 1e9);
    for (const Action& a : schedule.per_rank[r]) {
      if (!is_compute(a.kind)) continue;
      const ops::OpCountSection section(to_string(a));
      rank.kernels.add("matmul", (a.kind == ActionKind::forward ? forward : backward) * 1e9, 0);
    }
  }
  return ranks;
}

TEST(StepTime, APipelinesBubbleIsTheSchedulesClosedForm) {
  // GPipe and 1F1B: (m + p - 1)(F + B), each rank idle (p - 1)(F + B).
  const int p = 4, m = 6;
  const double forward = 1.0, backward = 2.0, after = 0.25;
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    PlanLayout layout = layout_of("pp=4");
    layout.pp.schedule = kind;
    const Schedule schedule = make_schedule(kind, p, m);
    const StepTimePrediction predicted =
        predict_step_time(layout, {.batch = m, .seq = 1, .micro_batches = m},
                          each(pipeline_ranks(schedule, forward, backward, after)), round_machine());
    EXPECT_DOUBLE_EQ(predicted.step, (m + p - 1) * (forward + backward) + after);
    for (const RankStepTime& rank : predicted.ranks) {
      EXPECT_DOUBLE_EQ(rank.bubble, (p - 1) * (forward + backward));
      EXPECT_DOUBLE_EQ(rank.compute, m * (forward + backward) + after);
    }
  }
}

// A pipeline's idle ranks lend their cores to the busy ones: four one-thread ranks of pp=2 x
// dp=2 on two cores, one micro-batch of F = B = 1 s: the stages never compute at once, so each
// has the cores to itself and the step is the schedule's 4 s, where stretching every kernel by
// ranks over cores would give 8 s. With 4 micro-batches under 1F1B the stages share the cores
// as they overlap, and the cores never idle: 4 ranks x 8 s of kernels over 2 cores = 16 s,
// against a pipeline of (4 + 1) x 2 = 10 s on cores of their own.
TEST(StepTime, APipelinesIdleRanksLendTheirCores) {
  MachineProfile shared = round_machine();
  shared.cores = 2;
  PlanLayout layout = layout_of("pp=2,dp_shard=2");
  layout.pp.schedule = ScheduleKind::one_f_one_b;
  for (const int m : {1, 4}) {
    const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, m);
    std::vector<ReplayedRank> stages = pipeline_ranks(schedule, 1.0, 1.0, 0.0);
    std::vector<ReplayedRank> ranks;  // pp outermost: ranks 0, 1 are stage 0's
    for (const ReplayedRank& stage : stages) ranks.insert(ranks.end(), 2, stage);
    const StepTimePrediction p =
        predict_step_time(layout, {.batch = m, .seq = 1, .micro_batches = m}, each(ranks), shared);
    const double own = (m + 1) * 2.0, cores = 4 * (2.0 * m) / 2;
    EXPECT_NEAR(p.step, std::max(own, cores), 1e-9) << m << " micro-batches";
    EXPECT_NEAR(p.ranks[0].compute + p.ranks[0].bubble + p.ranks[0].cores_wait, p.step, 1e-9);
    if (m == 1) {
      EXPECT_EQ(p.ranks[0].cores_wait, 0);
    }
  }
}

// A stage whose threads fill the cores computes at the share of them the ranks put to use, alone
// as much as beside another: one micro-batch of F = B = 1 s over pp=2 x dp=2 on two cores that
// ranks use at half their time takes each computation 2 s, a makespan of 8 s, of which rank 0
// computes 2 s, waits for the cores 2 s and idles 4 s while stage 1 computes.
TEST(StepTime, AStageFillingTheCoresComputesAtTheShareTheyPutToUse) {
  MachineProfile shared = round_machine();
  shared.cores = 2;
  shared.shared_core_efficiency = 0.5;
  PlanLayout layout = layout_of("pp=2,dp_shard=2");
  layout.pp.schedule = ScheduleKind::one_f_one_b;
  const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, 2, 1);
  std::vector<ReplayedRank> ranks;
  for (const ReplayedRank& stage : pipeline_ranks(schedule, 1.0, 1.0, 0.0))
    ranks.insert(ranks.end(), 2, stage);
  const StepTimePrediction p =
      predict_step_time(layout, {.batch = 1, .seq = 1, .micro_batches = 1}, each(ranks), shared);
  EXPECT_NEAR(p.step, 8.0, 1e-9);
  EXPECT_NEAR(p.ranks[0].compute, 2.0, 1e-9);
  EXPECT_NEAR(p.ranks[0].cores_wait, 2.0, 1e-9);
  EXPECT_NEAR(p.ranks[0].bubble, 4.0, 1e-9);
}

// On a machine whose memory and links cost nothing, a replayed step is its GEMMs at the GEMM
// rate: a single rank's exactly, a 3D layout's at least its busiest rank's.
TEST(StepTime, OfReplayedStepsIsTheirGemmsOnAMachineOfFreeTraffic) {
  MachineProfile free_traffic = round_machine();
  free_traffic.memory_bandwidth = free_traffic.intra_node_bandwidth =
      free_traffic.inter_node_bandwidth = 1e300;
  free_traffic.intra_node_latency = free_traffic.inter_node_latency = 0;
  const ModelSpecPtr gpt2 = gpt2_model(uneven_model());
  const Workload workload{.batch = 8, .seq = 13, .micro_batches = 2};
  const PlanLayout single = layout_of("dp_shard=1");
  const RankReplays one = replay_ranks(*gpt2, single, workload);
  EXPECT_DOUBLE_EQ(predict_step_time(single, workload, one, free_traffic).step,
                   one[0].kernels.total().flops / 1e9);

  PlanLayout layout = layout_of("pp=2,dp_shard=2,tp=2");
  layout.pp.schedule = ScheduleKind::one_f_one_b;
  const RankReplays ranks = replay_ranks(*gpt2, layout, workload);
  const StepTimePrediction p = predict_step_time(layout, workload, ranks, free_traffic);
  for (int r = 0; r < ranks.size(); ++r) {
    EXPECT_DOUBLE_EQ(p.ranks[r].compute, ranks[r].kernels.total().flops / 1e9);
    EXPECT_GE(p.step, p.ranks[r].compute);
    EXPECT_GT(p.ranks[r].bubble, 0.0) << "rank " << r;
    EXPECT_NEAR(p.ranks[r].total_exposed_comm(), 0.0, 1e-12);
  }
}

TEST(StepTime, RefusesAnUnusableMachineOrReplaysOfAnotherMesh) {
  const auto one = rank_of(1.0, {{"dp_shard", 0, 0}, {"dp", 0, 0}});
  MachineProfile broken = round_machine();
  broken.memory_bandwidth = 0;
  expect_error<InvalidArgument>(
      [&] { predict_step_time(layout_of("dp_shard=1"), {}, each({one}), broken); },
      "memory_bandwidth must be positive");
  expect_error<InvalidArgument>(
      [&] { predict_step_time(layout_of("dp_shard=2"), {}, each({one}), round_machine()); },
      "1 replayed ranks for the 2 ranks");
  expect_error<InvalidArgument>([&] { each({one})[1]; }, "RankReplays: rank 1 of 1");
  expect_error<InvalidArgument>(
      [&] {
        predicted_throughput(*gpt2_model(uneven_model()), layout_of("dp_shard=1"),
                             {.batch = 1, .seq = 1, .micro_batches = 1}, 0.0, round_machine());
      },
      "a step of 0 s; expected more than 0");
}

TEST(MachinePresets, StateThePublishedPeaksAndTheirEfficiency) {
  const MachineProfile h100 = machine_preset("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.dense_peak_flops(DType::bf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100.gemm_flops(DType::bf16), 0.6 * 989.4e12);
  EXPECT_EQ(h100.devices_per_node, 8);
  EXPECT_GT(machine_preset("h200").memory_bandwidth, h100.memory_bandwidth);
  for (const std::string& name : machine_preset_names()) machine_preset(name).check();
  expect_error<InvalidArgument>([] { machine_preset("tpu"); },
                                "unknown machine 'tpu'; the presets are h100-sxm, h200");
}

}  // namespace
}  // namespace meshtrain::testing

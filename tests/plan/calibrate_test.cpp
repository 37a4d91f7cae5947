// Calibration (meshtrain/plan/calibrate.h): the fit recovers a kernel's cost exactly from
// samples of it and stays non-negative; the measured steps call the kernels the replay counts;
// a profile survives its JSON and bad ones are refused by name.
#include "meshtrain/plan/calibrate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/cpu/cpu_threads.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/plan/rank_replay.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

TEST(FitKernel, RecoversACostPerCallAndPerUnit) {
  const double per_call = 2e-6, per_unit = 3e-11;
  std::vector<KernelSample> samples;
  for (const auto& [calls, work] : {std::pair{10, 1e8}, {40, 2e8}, {25, 9e8}})
    samples.push_back({calls, work, per_call * calls + per_unit * work});
  const KernelFit fit = fit_kernel(samples);
  EXPECT_NEAR(fit.per_call, per_call, 1e-12);
  EXPECT_NEAR(fit.per_unit, per_unit, 1e-17);
}

// Each sample's error counts relative to its time: two calls of 1 s and 2 s fit 1.2 s a call
// (an absolute fit: their mean, 1.5 s), so that a small shape is fitted as closely as a large one.
TEST(FitKernel, WeighsEachSampleByItsTime) {
  const KernelFit fit = fit_kernel({{1, 0, 1.0}, {1, 0, 2.0}});
  EXPECT_NEAR(fit.per_call, 1.2, 1e-12);
  EXPECT_EQ(fit.per_unit, 0.0);
}

TEST(FitKernel, StaysNonNegative) {
  // Time falling with calls at equal work: the unconstrained fit's per-call cost is negative.
  const KernelFit fit = fit_kernel({{10, 1e8, 0.5}, {20, 2e8, 0.6}, {40, 2e8, 0.4}});
  EXPECT_GE(fit.per_call, 0.0);
  EXPECT_GE(fit.per_unit, 0.0);
  // One shape alone: a line through the origin.
  const KernelFit one = fit_kernel({{4, 1e6, 2e-3}});
  EXPECT_NEAR(one.per_call * 4 + one.per_unit * 1e6, 2e-3, 1e-12);
  expect_error<InvalidArgument>([] { fit_kernel({}); }, "no samples");
}

// The measured steps call what the replay counts of one step, step by step.
TEST(MeasureKernels, TimesTheKernelsTheReplayCounts) {
  const ModelSpecPtr gpt2 = gpt2_model(uneven_model());
  const Workload workload{.batch = 4, .seq = 13, .micro_batches = 2};
  const MeasuredSteps measured = measure_kernels(*gpt2, workload, 2);
  const PlanLayout single{.mesh = parse_mesh_spec("dp_shard=1")};
  const ops::OpCounts::ByOp counted = replay_ranks(*gpt2, single, workload)[0].kernels.by_op();
  ASSERT_EQ(measured.kernels.size(), counted.size());
  int64_t calls = 0;
  for (const auto& [op, work] : counted) {
    const KernelSample& sample = measured.kernels.at(op);
    EXPECT_EQ(sample.calls, 2 * work.calls) << op;
    EXPECT_DOUBLE_EQ(sample.work, 2 * (work.flops > 0 ? work.flops : work.bytes)) << op;
    EXPECT_GT(sample.seconds, 0.0) << op;
    calls += sample.calls;
  }
  // The host's share: every kernel call of the two steps (its seconds, the untraced steps' time
  // less the kernels', clamped at 0, are not checked: a loaded machine measures 0, as 5 runs in
  // 40 did beside two busy loops on 2 cores).
  EXPECT_EQ(measured.host.calls, calls);
  EXPECT_EQ(measured.host.work, 0.0);
}

// The share of the cores from a measured step is the one that, in the profile, predicts that step
// as measured: on two cores the four ranks fill, and on sixteen they do not (where a share taken
// against the predicted step instead would leave the step at the ranks' own time).
TEST(CoresShareOfStep, PredictsTheMeasuredStepBack) {
  const ModelSpecPtr gpt2 = gpt2_model(uneven_model());
  const PlanLayout layout{.mesh = parse_mesh_spec("dp_shard=4")};
  const Workload workload{.batch = 8, .seq = 13, .micro_batches = 2};
  const RankReplays replays = replay_ranks(*gpt2, layout, workload);
  for (const int cores : {2, 16}) {
    MachineProfile machine = machine_preset("cpu");
    machine.cores = cores;
    const StepTimePrediction at_full_share = predict_step_time(layout, workload, replays, machine);
    const double measured = 1.3 * at_full_share.step;
    machine.shared_core_efficiency = cores_share_of_step(at_full_share, machine, measured);
    EXPECT_LT(machine.shared_core_efficiency, 1.0) << cores << " cores";
    EXPECT_NEAR(predict_step_time(layout, workload, replays, machine).step, measured,
                1e-9 * measured)
        << cores << " cores";
  }
  MachineProfile gpus = machine_preset("h100-sxm");
  const StepTimePrediction on_gpus =
      predict_step_time(layout, workload, replays, machine_preset("cpu"));
  expect_error<InvalidArgument>([&] { cores_share_of_step(on_gpus, gpus, 1.0); },
                                "a profile of shared CPU cores, got 0 cores");
}

// Four one-thread ranks: the calibration runs a real step of them and keeps the share of the
// cores they put to use, however many cores there are (the collectives' copies take theirs even
// where the ranks' threads fit them); a collective's latency as a step's calls meet it, for each
// group size.
TEST(Calibration, MeasuresTheShareOfTheCoresRanksPutToUseAndEachGroupsLatency) {
  const MachineProfile p =
      calibrate_this_machine({.ranks = 4, .threads_per_rank = 1, .steps = 1, .rounds = 1});
  EXPECT_EQ(p.cores, ops::cpu::available_cpus());
  EXPECT_GT(p.shared_core_efficiency, 0.0);
  EXPECT_LE(p.shared_core_efficiency, 1.0);
  // Each kind a step issues, in groups of 2 and of 4; a receive as a send.
  for (const CommOp kind : {CommOp::all_gather, CommOp::reduce_scatter, CommOp::all_reduce,
                            CommOp::send, CommOp::recv}) {
    ASSERT_TRUE(p.collectives.count(kind)) << comm_op_name(kind);
    const std::map<int, KernelFit>& by_size = p.collectives.at(kind);
    EXPECT_EQ(by_size.size(), 2u) << comm_op_name(kind);
    for (const auto& [size, fit] : by_size) {
      EXPECT_GE(fit.per_call, 0.0) << comm_op_name(kind) << " in groups of " << size;
      EXPECT_GT(fit.per_unit, 0.0) << comm_op_name(kind) << " in groups of " << size;
    }
  }
  EXPECT_EQ(p.collectives.size(), 5u);
  EXPECT_EQ(p.collectives.at(CommOp::recv).at(2).per_unit,
            p.collectives.at(CommOp::send).at(2).per_unit);
  EXPECT_EQ(p.intra_node_latency, p.collectives.at(CommOp::all_gather).at(4).per_call);
}

TEST(MachineProfiles, SurviveTheirJson) {
  MachineProfile p = machine_preset("cpu");
  p.kernels["matmul"] = {1.5e-6, 1.25e-11};
  p.kernels["add"] = {0, 2e-10};
  p.cores = 16;
  p.threads_per_rank = 2;
  p.host_per_call = 4e-6;
  p.shared_core_efficiency = 0.75;
  p.collectives[CommOp::all_gather][2] = {7e-5, 1.5e-10};
  p.collectives[CommOp::all_gather][4] = {1.2e-4, 1.25e-10};
  p.collectives[CommOp::send][2] = {3e-5, 2e-10};
  const MachineProfile back = parse_machine_profile(machine_profile_json(p), "p.json");
  EXPECT_EQ(back.name, "cpu");
  EXPECT_EQ(back.devices_per_node, p.devices_per_node);
  EXPECT_DOUBLE_EQ(back.intra_node_bandwidth, p.intra_node_bandwidth);
  EXPECT_DOUBLE_EQ(back.comm_overlap, 0.0);
  EXPECT_EQ(back.cores, 16);
  EXPECT_EQ(back.threads_per_rank, 2);
  ASSERT_EQ(back.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(back.kernels.at("matmul").per_unit, 1.25e-11);
  EXPECT_DOUBLE_EQ(back.host_per_call, 4e-6);
  EXPECT_DOUBLE_EQ(back.shared_core_efficiency, 0.75);
  ASSERT_EQ(back.collectives.size(), 2u);
  ASSERT_EQ(back.collectives.at(CommOp::all_gather).size(), 2u);
  EXPECT_DOUBLE_EQ(back.collectives.at(CommOp::all_gather).at(2).per_call, 7e-5);
  EXPECT_DOUBLE_EQ(back.collectives.at(CommOp::all_gather).at(4).per_unit, 1.25e-10);
  EXPECT_DOUBLE_EQ(back.collectives.at(CommOp::send).at(2).per_call, 3e-5);

  expect_error<InvalidArgument>([] { parse_machine_profile("[1, 2]", "p.json"); },
                                "p.json: a machine profile is a JSON object");
  std::string json = machine_profile_json(p);
  json.replace(json.find("\"comm_overlap\": 0"), 17, "\"comm_overlap\": 2");
  expect_error<InvalidArgument>([&] { parse_machine_profile(json, "p.json"); },
                                "p.json: machine 'cpu': comm_overlap is a share");
  json = machine_profile_json(p);
  json.replace(json.find("\"kernels\""), 9, "\"kernel\"");
  expect_error<InvalidArgument>([&] { parse_machine_profile(json, "p.json"); },
                                "the machine profile has no 'kernels'");
  json = machine_profile_json(p);
  json.replace(json.find("\"2\": {"), 3, "\"1\"");
  expect_error<InvalidArgument>(
      [&] { parse_machine_profile(json, "p.json"); },
      "the all_gather fits are keyed by group sizes of at least 2, got '1'");
  json = machine_profile_json(p);
  json.replace(json.find("\"2\": {"), 3, "\"02\"");
  expect_error<InvalidArgument>([&] { parse_machine_profile(json, "p.json"); },
                                "group sizes of at least 2, got '02'");
  MachineProfile negative = p;
  negative.collectives[CommOp::all_gather][2].per_unit = -1;
  expect_error<InvalidArgument>(
      [&] { parse_machine_profile(machine_profile_json(negative), "p.json"); },
      "the all_gather fit of groups of 2 must be non-negative");
  json = machine_profile_json(p);
  json.replace(json.find("\"all_gather\""), 12, "\"all_gathers\"");
  expect_error<InvalidArgument>([&] { parse_machine_profile(json, "p.json"); },
                                "'collectives' maps each kind of collective");
  MachineProfile idle = p;
  idle.shared_core_efficiency = 0;
  expect_error<InvalidArgument>(
      [&] { parse_machine_profile(machine_profile_json(idle), "p.json"); },
      "shared_core_efficiency is a share, above 0 and at most 1, got 0");
}

// A profile calibrated before the host, collective and shared-core figures reads back without
// them.
TEST(MachineProfiles, ReadBackWithoutTheHostAndCollectiveFits) {
  MachineProfile p = machine_preset("cpu");
  p.host_per_call = 4e-6;
  p.shared_core_efficiency = 0.75;
  p.collectives[CommOp::all_gather][2] = {7e-5, 1.5e-10};
  nlohmann::json json = nlohmann::json::parse(machine_profile_json(p));
  json.erase("host_per_call");
  json.erase("shared_core_efficiency");
  json.erase("collectives");
  const MachineProfile back = parse_machine_profile(json.dump(), "old.json");
  EXPECT_EQ(back.host_per_call, 0.0);
  EXPECT_EQ(back.shared_core_efficiency, 1.0);
  EXPECT_TRUE(back.collectives.empty());
  json["collectives"] = 2;
  expect_error<InvalidArgument>(
      [&] { parse_machine_profile(json.dump(), "old.json"); },
      "'collectives' must map each kind of collective to its fits by group size, got 2");
  // Fits by group size alone, as profiles were calibrated before the fits per kind.
  json["collectives"] = {{"2", {{"per_call", 7e-5}, {"per_unit", 1.5e-10}}}};
  expect_error<InvalidArgument>([&] { parse_machine_profile(json.dump(), "old.json"); }, "got '2'",
                                "calibrate again");
}

}  // namespace
}  // namespace meshtrain::testing

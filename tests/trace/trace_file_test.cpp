// --trace and --profile end to end: the Chrome trace files a run writes (one per rank, valid JSON
// Trace Event Format, well-nested tracks, every kind of span), the profile table, the trace of a
// failed run, and that nothing is written without --trace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "meshtrain/train/run_training.h"
#include "tests/apps/apps_test_support.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

TrainConfig tiny_config(const ScratchDir& dir, int world) {
  return testing::tiny_train_config(dir, world, 3);
}

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(testing::read_text(path));  // throws on invalid JSON
}

struct Event {
  std::string name, cat;
  double ts, dur;
  int tid;
};

// The complete events of a trace, checked field by field; track names by tid.
std::vector<Event> complete_events(const nlohmann::json& trace, int rank,
                                   std::map<int, std::string>& tracks) {
  EXPECT_TRUE(trace.contains("traceEvents"));
  std::vector<Event> events;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    EXPECT_EQ(e.at("pid").get<int>(), rank);
    const std::string ph = e.at("ph").get<std::string>();
    if (ph == "M") {
      if (e.at("name") == "thread_name")
        tracks[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
      continue;
    }
    EXPECT_EQ(ph, "X") << e.dump();
    Event ev{e.at("name").get<std::string>(), e.at("cat").get<std::string>(),
             e.at("ts").get<double>(), e.at("dur").get<double>(), e.at("tid").get<int>()};
    EXPECT_GE(ev.dur, 0.0) << e.dump();
    EXPECT_GT(ev.ts, 0.0) << e.dump();
    EXPECT_THAT((std::set<std::string>{"step", "layer", "kernel", "wait", "comm", "other"}),
                ::testing::Contains(ev.cat));
    events.push_back(ev);
  }
  for (const Event& e : events) EXPECT_TRUE(tracks.count(e.tid)) << "undeclared tid " << e.tid;
  return events;
}

// Spans on one track nest or follow each other; a partial overlap would break the viewers.
void expect_well_nested(std::vector<Event> events, const std::map<int, std::string>& tracks) {
  std::map<int, std::vector<Event>> by_tid;
  for (const Event& e : events) by_tid[e.tid].push_back(e);
  for (auto& [tid, list] : by_tid) {
    std::sort(list.begin(), list.end(), [](const Event& a, const Event& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
    });
    std::vector<double> open_ends;
    for (const Event& e : list) {
      while (!open_ends.empty() && open_ends.back() <= e.ts) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(e.ts + e.dur, open_ends.back() + 1e-3)
            << e.name << " overlaps its enclosing span on track " << tracks.at(tid);
      }
      open_ends.push_back(e.ts + e.dur);
    }
  }
}

int count_named(const std::vector<Event>& events, const std::string& cat, const std::string& name) {
  return static_cast<int>(std::count_if(events.begin(), events.end(), [&](const Event& e) {
    return e.cat == cat && e.name == name;
  }));
}

TEST(TraceFile, EachRankWritesAWellFormedChromeTrace) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.trace_dir = dir.file("trace");  // created by the run
  std::ostringstream out;
  run_training(c, out, false);
  EXPECT_EQ(out.str(), "") << "quiet runs print nothing";
  EXPECT_FALSE(std::filesystem::exists(dir.file("trace/rank_0.json.partial")));
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const nlohmann::json trace =
        read_json(dir.file("trace/rank_" + std::to_string(rank) + ".json"));
    EXPECT_EQ(trace.at("otherData").at("rank"), std::to_string(rank));
    std::map<int, std::string> tracks;
    const std::vector<Event> events = complete_events(trace, rank, tracks);
    EXPECT_EQ(tracks.at(0), "compute");
    std::set<std::string> names;
    for (const auto& [tid, name] : tracks) names.insert(name);
    EXPECT_TRUE(names.count("comm dp_shard")) << "one track per communicator";
    EXPECT_TRUE(names.count("comm world"));
    for (int s = 1; s <= 3; ++s)
      EXPECT_EQ(count_named(events, "step", "step " + std::to_string(s)), 1);
    // Each layer forward and backward, once per step: the embedding, two blocks, the head.
    for (const char* layer : {"h.0", "h.1"}) {
      EXPECT_EQ(count_named(events, "layer", std::string("forward ") + layer), 3) << layer;
      EXPECT_EQ(count_named(events, "layer", std::string("backward ") + layer), 3) << layer;
    }
    EXPECT_EQ(count_named(events, "kernel", "linear_forward"), 3 * 2 * 4);
    EXPECT_EQ(count_named(events, "kernel", "attention_backward"), 3 * 2);
    EXPECT_GT(count_named(events, "kernel", "adamw_step"), 0);
    // FSDP's collectives, named by unit, on the dp_shard tracks.
    EXPECT_EQ(count_named(events, "comm", "all_gather h.0"), 3 * 2) << "forward and backward";
    EXPECT_EQ(count_named(events, "comm", "reduce_scatter h.1"), 3);
    for (const Event& e : events) {
      if (e.cat == "comm" && e.name.rfind("all_gather h.", 0) == 0) {
        EXPECT_EQ(tracks.at(e.tid).rfind("comm dp_shard", 0), 0u) << tracks.at(e.tid);
      }
      if (e.cat != "comm") {
        EXPECT_EQ(e.tid, 0) << e.name << " belongs on the compute track";
      }
      if (e.cat == "wait") {
        EXPECT_EQ(e.name.rfind("wait ", 0), 0u) << e.name;
      }
    }
    expect_well_nested(events, tracks);
  }
}

TEST(TraceFile, NothingIsWrittenWithoutTrace) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.profile = true;  // profiling alone keeps totals, writes no file
  c.quiet = false;
  std::ostringstream out;
  run_training(c, out, false);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.file("")))
    EXPECT_THAT(entry.path().filename().string(),
                ::testing::AnyOf("tokens.bin", "stdout.txt", "stderr.txt"))
        << entry.path();
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("profile: 3 steps on 2 ranks"));
  EXPECT_THAT(text, HasSubstr("linear_backward"));
  EXPECT_THAT(text, HasSubstr("comm waits (exposed)"));
  EXPECT_THAT(text, HasSubstr("comm in flight (any group)"));
  EXPECT_THAT(text, HasSubstr("GFLOP/s"));
}

TEST(TraceFile, AFailedRunStillWritesWhatItRecorded) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 2);
  c.trace_dir = dir.file("trace");
  ::setenv("MESHTRAIN_FAULT", "1:3:raise", 1);  // rank 1 raises before step 3
  std::ostringstream out;
  EXPECT_THROW(run_training(c, out, false), std::exception);
  ::unsetenv("MESHTRAIN_FAULT");
  for (int rank = 0; rank < 2; ++rank) {
    std::map<int, std::string> tracks;
    const std::vector<Event> events = complete_events(
        read_json(dir.file("trace/rank_" + std::to_string(rank) + ".json")), rank, tracks);
    EXPECT_EQ(count_named(events, "step", "step 2"), 1) << "rank " << rank;
  }
}

TEST(TraceFile, ABadTraceFolderIsRefusedBeforeTraining) {
  ScratchDir dir;
  TrainConfig c = tiny_config(dir, 1);
  testing::write_text(dir.file("file"), "x");
  c.trace_dir = dir.file("file");
  testing::expect_error<InvalidArgument>([&] { c.validate(); }, "--trace", "is not a folder");
  c.trace_dir = dir.file("missing/trace");
  testing::expect_error<InvalidArgument>([&] { c.validate(); }, "--trace", "does not exist");
}

#ifdef MESHTRAIN_CLI
TEST(TraceFile, TheCommandLineTakesTraceAndProfile) {
  ScratchDir dir;
  write_token_file(dir.file("tokens.bin"),
                   testing::tokens_from_text(testing::sample_prose(20), 64));
  const auto r = testing::run_cli(MESHTRAIN_CLI, dir,
                                  "train --model tiny --data '" + dir.file("tokens.bin") +
                                      "' --steps 2 --batch 4 --seq 16 "
                                      "--world 2 --sample 0 --profile --trace '" +
                                      dir.file("t") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("profile: 2 steps on 2 ranks"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("t/rank_0.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("t/rank_1.json")));
}
#endif

}  // namespace
}  // namespace meshtrain

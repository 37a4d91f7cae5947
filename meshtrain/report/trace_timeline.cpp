#include "meshtrain/report/trace_timeline.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/report/svg_timeline.h"

namespace meshtrain {

namespace {

namespace fs = std::filesystem;

constexpr char kActionPrefix[] = "pipeline ";       // the runner's span: "pipeline 1F3"
constexpr char kUpdateName[] = "optimizer update";  // the trainer's span after the pipeline
constexpr char kUpdateColor[] = "#8c564b";
constexpr char kWaitColor[] = "#d62728";

// One span of a rank's compute track, in the trace's microseconds.
struct Event {
  std::string cat, name;
  double begin_us = 0, end_us = 0;
};

struct RankTrace {
  int rank = 0;
  std::string file;
  std::string mesh;                 // its otherData's, "" for none
  std::vector<Event> events;        // by start
  std::map<int64_t, size_t> steps;  // "step 3" -> 3: the index of its span in events
};

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Only the compute track's step, action, update, wait and layer spans are kept: the parser drops
// every other event (kernels, comm tracks, metadata) as it reads, so a large trace stays small.
bool wanted(const nlohmann::json& event) {
  if (event.value("ph", "") != "X" || event.value("tid", -1) != 0) return false;
  const std::string cat = event.value("cat", "");
  return cat == "step" || cat == "other" || cat == "wait" || cat == "layer";
}

RankTrace read_rank(int rank, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("--trace: cannot read '" + file.string() + "'");
  RankTrace trace{rank, file.string(), "", {}, {}};
  try {
    const nlohmann::json doc = nlohmann::json::parse(
        in, [](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return event != nlohmann::json::parse_event_t::object_end || !parsed.contains("ph") ||
                 wanted(parsed);
        });
    if (const auto other = doc.find("otherData"); other != doc.end() && other->is_object())
      trace.mesh = other->value("mesh", "");
    for (const nlohmann::json& e : doc.at("traceEvents")) {
      const double ts = e.at("ts").get<double>();
      trace.events.push_back({e.at("cat").get<std::string>(), e.at("name").get<std::string>(), ts,
                              ts + e.at("dur").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("--trace: '" + file.string() +
                          "' is not a trace that meshtrain train --trace wrote: " + e.what());
  }
  std::stable_sort(trace.events.begin(), trace.events.end(),
                   [](const Event& a, const Event& b) { return a.begin_us < b.begin_us; });
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (e.cat != "step" || !starts_with(e.name, "step ")) continue;
    int64_t step = 0;
    const char* end = e.name.data() + e.name.size();
    if (std::from_chars(e.name.data() + 5, end, step).ptr == end) trace.steps[step] = i;
  }
  return trace;
}

// Every rank_<r>.json of `dir`, in rank order.
std::vector<RankTrace> read_ranks(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw InvalidArgument("--trace: '" + dir +
                          "' is not a folder; meshtrain train --trace DIR writes one");
  std::map<int, fs::path> files;
  // One spelling per rank (no leading zeros), so that two files cannot claim one rank.
  const std::regex rank_file(R"(rank_(0|[1-9]\d{0,5})\.json)");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, rank_file)) files[std::stoi(match[1])] = entry.path();
  }
  if (files.empty())
    throw InvalidArgument("--trace: '" + dir +
                          "' holds no rank_<r>.json; meshtrain train --trace DIR writes them");
  std::vector<RankTrace> ranks;
  for (const auto& [rank, file] : files) ranks.push_back(read_rank(rank, file));
  return ranks;
}

// The steps every rank's trace holds; `step` (0: the last of them) must be one.
int64_t pick_step(const std::vector<RankTrace>& ranks, const std::string& dir, int64_t step) {
  std::set<int64_t> common;
  for (const auto& [n, index] : ranks.front().steps) common.insert(n);
  for (const RankTrace& r : ranks)
    std::erase_if(common, [&](int64_t n) { return !r.steps.count(n); });
  if (common.empty())
    throw InvalidArgument("--trace: no step is in every rank's trace in '" + dir + "'");
  if (step == 0) return *common.rbegin();
  if (!common.count(step))
    throw InvalidArgument(detail::concat(
        "--trace: step ", step, " is not in every rank's trace in '", dir, "' (they hold ",
        common.size(), " steps, ", *common.begin(), " to ", *common.rbegin(), ")"));
  return step;
}

// "1F3" -> its kind and micro-batch; InvalidArgument naming the file for another name.
TracedAction parse_action(const std::string& name, const std::string& file) {
  static const std::regex action(R"((\d{1,6})([FBIW])(\d{1,6}))");  // a schedule's sizes
  std::smatch match;
  if (!std::regex_match(name, match, action))
    throw InvalidArgument("--trace: '" + file + "' holds the span '" + kActionPrefix + name +
                          "', not a pipeline computation (stage, F, B, I or W, micro-batch)");
  TracedAction out;
  out.span.name = name;
  out.stage = std::stoi(match.str(1));
  out.kind = match.str(2)[0];
  out.micro_batch = std::stoi(match.str(3));
  return out;
}

TracedRank traced_rank(const RankTrace& trace, const Event& step, double origin_us) {
  const auto ms = [&](double us) { return (us - origin_us) / 1000; };
  const auto span = [&](std::string name, const Event& e) {
    return TracedSpan{std::move(name), ms(e.begin_us), ms(e.end_us)};
  };
  // Spans on one track nest or follow each other: one that starts inside another lies inside it.
  const auto inside = [](const Event& e, const Event& outer) {
    return e.begin_us >= outer.begin_us && e.begin_us < outer.end_us;
  };
  TracedRank out{trace.rank, span(step.name, step), {}, std::nullopt, {}};
  std::vector<const Event*> actions, layers;
  for (const Event& e : trace.events) {
    if (!inside(e, step)) continue;
    if (e.cat == "layer") layers.push_back(&e);
    if (e.cat == "wait") out.waits.push_back(span(e.name.substr(e.name.find(' ') + 1), e));
    if (e.cat == "other" && e.name == kUpdateName) out.update = span(e.name, e);
    if (e.cat == "other" && starts_with(e.name, kActionPrefix)) actions.push_back(&e);
  }
  for (const Event* e : actions) {
    TracedAction a = parse_action(e->name.substr(sizeof kActionPrefix - 1), trace.file);
    a.span = span(a.span.name, *e);
    // The time before its first layer was the wait for its input: the bubble, not compute.
    const auto first_layer =
        std::find_if(layers.begin(), layers.end(), [&](const Event* l) { return inside(*l, *e); });
    a.compute_start_ms =
        first_layer == layers.end() ? a.span.start_ms : ms((*first_layer)->begin_us);
    out.actions.push_back(std::move(a));
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// Each lane's pipeline: the first rank of its pp group, or 0 for every lane without a mesh (or a
// mesh without pp, whose ranks draw no transfers).
std::vector<int> pipeline_of_lanes(const TracedStep& step) {
  std::vector<int> out(step.ranks.size(), 0);
  if (step.mesh.empty()) return out;
  const MeshLayout mesh = parse_mesh_spec(step.mesh);
  if (!mesh.has_axis(mesh_axis::pp)) return out;
  for (size_t lane = 0; lane < step.ranks.size(); ++lane) {
    const int rank = step.ranks[lane].rank;
    MT_CHECK(rank < mesh.size(), "--trace: '", step.dir, "' holds rank ", rank,
             "'s trace, outside its mesh ", step.mesh);
    out[lane] = mesh.group_of(rank, {std::string(mesh_axis::pp)}).front();
  }
  return out;
}

// The step's transfers between stages (traced_step_svg).
std::vector<TimelineArrow> traced_transfers(const TracedStep& step) {
  const std::vector<int> pipeline = pipeline_of_lanes(step);
  // (pipeline, stage, kind, micro-batch) -> its lane and action, or null where several claim it.
  std::map<std::tuple<int, int, char, int>, std::pair<int, const TracedAction*>> actions;
  for (size_t lane = 0; lane < step.ranks.size(); ++lane)
    for (const TracedAction& a : step.ranks[lane].actions) {
      const auto [it, added] = actions.try_emplace({pipeline[lane], a.stage, a.kind, a.micro_batch},
                                                   static_cast<int>(lane), &a);
      if (!added) it->second.second = nullptr;
    }
  const auto find = [&](int pipe, int stage, char kind, int micro_batch) {
    const auto it = actions.find({pipe, stage, kind, micro_batch});
    return it == actions.end() ? std::pair<int, const TracedAction*>{0, nullptr} : it->second;
  };
  std::vector<TimelineArrow> out;
  for (size_t lane = 0; lane < step.ranks.size(); ++lane)
    for (const TracedAction& a : step.ranks[lane].actions) {
      std::pair<int, const TracedAction*> to{0, nullptr};
      if (a.kind == 'F') to = find(pipeline[lane], a.stage + 1, 'F', a.micro_batch);
      if ((a.kind == 'B' || a.kind == 'I') && a.stage > 0) {
        to = find(pipeline[lane], a.stage - 1, 'B', a.micro_batch);
        if (!to.second) to = find(pipeline[lane], a.stage - 1, 'I', a.micro_batch);
      }
      if (to.second)
        out.push_back(
            {static_cast<int>(lane), a.span.end_ms, to.first, to.second->compute_start_ms});
    }
  return out;
}

}  // namespace

TracedStep read_traced_step(const std::string& dir, int64_t step) {
  const std::vector<RankTrace> ranks = read_ranks(dir);
  TracedStep out{dir, pick_step(ranks, dir, step), 0, {}, ranks.front().mesh};
  const auto step_span = [&](const RankTrace& r) -> const Event& {
    return r.events[r.steps.at(out.step)];
  };
  double origin_us = std::numeric_limits<double>::infinity();
  for (const RankTrace& r : ranks) origin_us = std::min(origin_us, step_span(r).begin_us);
  for (const RankTrace& r : ranks) {
    out.ranks.push_back(traced_rank(r, step_span(r), origin_us));
    for (const TracedAction& a : out.ranks.back().actions)
      out.micro_batches = std::max(out.micro_batches, a.micro_batch + 1);
  }
  if (out.micro_batches == 0)
    throw InvalidArgument(detail::concat(
        "--trace: step ", out.step, " in '", dir,
        "' ran no pipeline action: was the run pipelined? train with --mesh pp=... to draw one"));
  return out;
}

std::string traced_step_report(const TracedStep& step) {
  double end_ms = 0;
  for (const TracedRank& r : step.ranks) end_ms = std::max(end_ms, r.step.end_ms);
  std::ostringstream out;
  out << "step " << step.step << " of " << step.dir << ": " << step.ranks.size() << " ranks, "
      << step.micro_batches << " micro-batches, " << fixed(end_ms, 3)
      << " ms from the first rank's start to the last one's end\n";
  for (const TracedRank& r : step.ranks) {
    out << "rank " << r.rank << ":";
    for (const TracedAction& a : r.actions) out << " " << a.span.name;
    out << "\n";
  }
  out << "rank   step ms  computing ms  waiting ms   rest ms\n";
  for (const TracedRank& r : step.ranks) {
    double computing = 0, waiting = 0;
    for (const TracedSpan& w : r.waits) waiting += w.end_ms - w.start_ms;
    for (const TracedAction& a : r.actions) {
      computing += a.span.end_ms - a.compute_start_ms;
      for (const TracedSpan& w : r.waits)
        if (w.start_ms >= a.compute_start_ms && w.start_ms < a.span.end_ms)
          computing -= w.end_ms - w.start_ms;
    }
    const double step_ms = r.step.end_ms - r.step.start_ms;
    char line[96];
    std::snprintf(line, sizeof line, "%4d %9.3f %13.3f %11.3f %9.3f\n", r.rank, step_ms, computing,
                  waiting, step_ms - computing - waiting);
    out << line;
  }
  out << "computing: the actions from their first layer on, less the waits in them; waiting: the "
         "exposed communication; rest: the update, the host's work between actions and any idle "
         "time without a wait\n";
  return out.str();
}

std::string traced_step_svg(const TracedStep& step) {
  Timeline t;
  t.title = detail::concat("step ", step.step, " of ", step.dir, " as run: ", step.ranks.size(),
                           " ranks, ", step.micro_batches, " micro-batches");
  t.time_unit = detail::concat("ms from the start of step ", step.step);
  const auto times = [](const TracedSpan& s) {
    return fixed(s.start_ms, 3) + " to " + fixed(s.end_ms, 3) + " ms";
  };
  for (size_t lane = 0; lane < step.ranks.size(); ++lane) {
    const TracedRank& r = step.ranks[lane];
    const int l = static_cast<int>(lane);
    const std::string rank = "rank " + std::to_string(r.rank) + ": ";
    t.lanes.push_back("rank " + std::to_string(r.rank));
    for (const TracedAction& a : r.actions) {
      std::string tooltip =
          rank + a.span.name + " computing from " + times({"", a.compute_start_ms, a.span.end_ms});
      for (const TracedSpan& w : r.waits)  // the wait for its input, before its first layer
        if (w.start_ms >= a.span.start_ms && w.start_ms < a.compute_start_ms)
          tooltip += ", after waiting " + fixed(w.end_ms - w.start_ms, 3) + " ms on " + w.name;
      t.boxes.push_back({l, a.compute_start_ms, a.span.end_ms, a.span.name,
                         pipeline_action_color(a.kind), tooltip});
    }
    if (r.update)
      t.boxes.push_back({l, r.update->start_ms, r.update->end_ms, "update", kUpdateColor,
                         rank + kUpdateName + " from " + times(*r.update)});
  }
  // Drawn last, over the actions they interrupt.
  for (size_t lane = 0; lane < step.ranks.size(); ++lane)
    for (const TracedSpan& w : step.ranks[lane].waits)
      t.boxes.push_back({static_cast<int>(lane), w.start_ms, w.end_ms, "wait", kWaitColor,
                         "rank " + std::to_string(step.ranks[lane].rank) + ": waited on " + w.name +
                             " from " + times(w)});
  t.arrows = traced_transfers(step);
  t.legend = pipeline_legend();
  t.legend.push_back({kUpdateName, kUpdateColor});
  t.legend.push_back({"wait: exposed communication", kWaitColor});
  return svg_timeline(t);
}

}  // namespace meshtrain

#include "meshtrain/train/trace_output.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

// Microseconds with three decimals, exactly (a double would round nanoseconds of a long uptime).
std::string micros(int64_t ns) {
  const bool negative = ns < 0;
  const uint64_t v = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char text[40];
  std::snprintf(text, sizeof text, "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(v / 1000),
                static_cast<unsigned long long>(v % 1000));
  return text;
}

std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

void write_events(std::ostream& out, const trace::Recorder& recorder,
                  const std::map<std::string, std::string>& info) {
  const int pid = recorder.rank();
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  bool first = true;
  std::map<std::string, std::string> other = info;
  other["rank"] = std::to_string(pid);
  other["clock"] = "steady_clock (monotonic), microseconds";
  other["dropped_spans"] = std::to_string(recorder.dropped_spans());
  for (const auto& [key, value] : other) {
    out << (first ? "" : ",") << quoted(key) << ":" << quoted(value);
    first = false;
  }
  out << "},\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"args\":{\"name\":\"rank "
      << pid << "\"}},\n";
  out << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << pid
      << ",\"args\":{\"sort_index\":" << pid << "}}";
  const std::vector<std::string> tracks = recorder.track_names();
  for (size_t t = 0; t < tracks.size(); ++t) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << t
        << ",\"args\":{\"name\":" << quoted(tracks[t]) << "}}";
    out << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << t
        << ",\"args\":{\"sort_index\":" << t << "}}";
  }
  for (const trace::Span& s : recorder.spans()) {
    out << ",\n{\"name\":" << quoted(s.name) << ",\"cat\":\"" << trace::kind_name(s.kind)
        << "\",\"ph\":\"X\",\"ts\":" << micros(s.begin_ns)
        << ",\"dur\":" << micros(std::max<int64_t>(0, s.end_ns - s.begin_ns)) << ",\"pid\":" << pid
        << ",\"tid\":" << s.track;
    if (!s.args.empty()) {
      out << ",\"args\":{";
      for (size_t i = 0; i < s.args.size(); ++i)
        out << (i ? "," : "") << quoted(s.args[i].first) << ":" << quoted(s.args[i].second);
      out << "}";
    }
    out << "}";
  }
  out << "\n]}\n";
}

nlohmann::json totals_json(const std::map<std::string, trace::Totals>& totals) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, t] : totals) j[name] = {t.calls, t.ns};
  return j;
}

std::map<std::string, trace::Totals> totals_from(const nlohmann::json& j) {
  std::map<std::string, trace::Totals> totals;
  for (const auto& [name, v] : j.items())
    totals[name] = {v.at(0).get<int64_t>(), v.at(1).get<int64_t>()};
  return totals;
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// "wait all_gather h.3" -> "all_gather"; "wait send to 1 ..." -> "send"; "wait comm" -> "comm".
std::string wait_kind(const std::string& name) {
  std::string rest = starts_with(name, "wait ") ? name.substr(5) : name;
  return rest.substr(0, rest.find(' '));
}

}  // namespace

std::string write_chrome_trace(const trace::Recorder& recorder, const std::string& dir,
                               const std::map<std::string, std::string>& info) {
  const std::string path =
      (std::filesystem::path(dir) / ("rank_" + std::to_string(recorder.rank()) + ".json")).string();
  AtomicFile file(path);
  {
    std::ofstream out(file.partial_path(), std::ios::trunc);
    if (!out)
      throw IoError(detail::concat("--trace: cannot write '", file.partial_path(),
                                   "': ", std::strerror(errno)));
    write_events(out, recorder, info);
    out.flush();
    if (!out)
      throw IoError(detail::concat("--trace: writing '", file.partial_path(),
                                   "' failed: ", std::strerror(errno)));
  }
  file.commit();
  return path;
}

int64_t RankProfile::kernel_ns() const {
  int64_t ns = 0;
  for (const auto& [name, t] : kernels) ns += t.ns;
  return ns;
}

int64_t RankProfile::wait_ns() const {
  int64_t ns = 0;
  for (const auto& [name, t] : waits) ns += t.ns;
  return ns;
}

RankProfile rank_profile(const trace::Recorder& recorder) {
  RankProfile p;
  for (const auto& [key, t] : recorder.totals()) {
    const auto& [kind, name] = key;
    switch (kind) {
      case trace::Kind::step:
        p.steps += t.calls;
        p.step_ns += t.ns;
        break;
      case trace::Kind::kernel:
        p.kernels[name] = t;
        break;
      case trace::Kind::wait: {
        trace::Totals& w = p.waits[wait_kind(name)];
        w.calls += t.calls;
        w.ns += t.ns;
        break;
      }
      case trace::Kind::layer:
        (starts_with(name, "forward ") ? p.forward_ns : p.backward_ns) += t.ns;
        break;
      case trace::Kind::comm:
      case trace::Kind::other:
        break;
    }
  }
  for (const std::string& group : recorder.comm_groups())
    p.comm_busy_ns[group] = recorder.comm_busy_ns(group);
  p.comm_busy_ns[""] = recorder.comm_busy_ns();
  return p;
}

std::string to_json(const RankProfile& p) {
  nlohmann::json j = {{"steps", p.steps},
                      {"step_ns", p.step_ns},
                      {"kernels", totals_json(p.kernels)},
                      {"waits", totals_json(p.waits)},
                      {"comm_busy_ns", p.comm_busy_ns},
                      {"forward_ns", p.forward_ns},
                      {"backward_ns", p.backward_ns}};
  return j.dump();
}

RankProfile rank_profile_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  RankProfile p;
  p.steps = j.at("steps").get<int64_t>();
  p.step_ns = j.at("step_ns").get<int64_t>();
  p.kernels = totals_from(j.at("kernels"));
  p.waits = totals_from(j.at("waits"));
  p.comm_busy_ns = j.at("comm_busy_ns").get<std::map<std::string, int64_t>>();
  p.forward_ns = j.at("forward_ns").get<int64_t>();
  p.backward_ns = j.at("backward_ns").get<int64_t>();
  return p;
}

std::string profile_table(const std::vector<RankProfile>& ranks, double flops_per_step) {
  MT_CHECK(!ranks.empty(), "profile_table: no ranks");
  const int64_t steps = ranks.front().steps;
  std::string text;
  char line[256];
  if (steps == 0) return "profile: no steps were profiled\n";
  const double per_step = 1e-6 / static_cast<double>(steps);  // ns in total -> ms per step
  const size_t n = ranks.size();
  // One row: a figure of each rank (ns over the run), its mean and maximum per step.
  const auto row = [&](const std::string& label, const std::vector<double>& ns, double calls,
                       double step_ms) {
    double sum = 0, most = 0;
    for (double v : ns) {
      sum += v;
      most = std::max(most, v);
    }
    const double mean_ms = sum / static_cast<double>(n) * per_step;
    char calls_text[32] = "";
    if (calls >= 0) std::snprintf(calls_text, sizeof calls_text, "%.1f", calls);
    std::snprintf(line, sizeof line, "  %-30s %10.2f %10.2f %10s %7.1f%%\n", label.c_str(), mean_ms,
                  most * per_step, calls_text, step_ms > 0 ? 100.0 * mean_ms / step_ms : 0.0);
    text += line;
  };
  const auto each = [&](auto&& figure) {
    std::vector<double> v;
    for (const RankProfile& r : ranks) v.push_back(static_cast<double>(figure(r)));
    return v;
  };
  const auto mean_calls = [&](auto&& figure) {
    double calls = 0;
    for (const RankProfile& r : ranks) calls += static_cast<double>(figure(r));
    return calls / static_cast<double>(n) / static_cast<double>(steps);
  };
  const std::vector<double> step_ns = each([](const RankProfile& r) { return r.step_ns; });
  double step_ms = 0, slowest_step_ns = 0;
  for (double v : step_ns) {
    step_ms += v;
    slowest_step_ns = std::max(slowest_step_ns, v);
  }
  step_ms = step_ms / static_cast<double>(n) * per_step;

  std::snprintf(line, sizeof line,
                "profile: %lld steps on %zu rank%s; per step, the mean over ranks and the slowest "
                "rank\n",
                static_cast<long long>(steps), n, n > 1 ? "s" : "");
  text += line;
  std::snprintf(line, sizeof line, "  %-30s %10s %10s %10s %8s\n", "", "mean ms", "max ms", "calls",
                "of step");
  text += line;
  row("step", step_ns, 1, step_ms);
  // A group of named figures (kernels or waits): its total row, then one row per name, slowest
  // first or by name.
  using Named = std::map<std::string, trace::Totals>;
  const auto group = [&](const std::string& title, const std::string& prefix,
                         const Named RankProfile::*member, bool slowest_first) {
    std::map<std::string, double> total_ns;  // over the ranks
    for (const RankProfile& r : ranks)
      for (const auto& [name, t] : r.*member) total_ns[name] += static_cast<double>(t.ns);
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [name, ns] : total_ns) order.emplace_back(slowest_first ? -ns : 0.0, name);
    std::sort(order.begin(), order.end());
    const auto sum = [&](const RankProfile& r, int64_t trace::Totals::*field) {
      int64_t total = 0;
      for (const auto& [name, t] : r.*member) total += t.*field;
      return total;
    };
    row(title, each([&](const RankProfile& r) { return sum(r, &trace::Totals::ns); }),
        mean_calls([&](const RankProfile& r) { return sum(r, &trace::Totals::calls); }), step_ms);
    for (const auto& [unused, name] : order) {
      const auto figure = [&](const RankProfile& r) {
        const auto it = (r.*member).find(name);
        return it == (r.*member).end() ? trace::Totals{} : it->second;
      };
      row(prefix + name, each([&](const RankProfile& r) { return figure(r).ns; }),
          mean_calls([&](const RankProfile& r) { return figure(r).calls; }), step_ms);
    }
  };
  group("compute kernels", "  ", &RankProfile::kernels, true);
  group("comm waits (exposed)", "  wait ", &RankProfile::waits, false);
  row("other (host, untraced)",
      each([](const RankProfile& r) { return r.step_ns - r.kernel_ns() - r.wait_ns(); }), -1,
      step_ms);
  row("layers forward", each([](const RankProfile& r) { return r.forward_ns; }), -1, step_ms);
  row("layers backward", each([](const RankProfile& r) { return r.backward_ns; }), -1, step_ms);

  // Communication: in flight (the union of the ops' issue-to-completion spans) against exposed.
  std::map<std::string, bool> groups;
  for (const RankProfile& r : ranks)
    for (const auto& [group, ns] : r.comm_busy_ns) groups[group] = true;
  const auto busy = [](const RankProfile& r, const std::string& group) {
    const auto it = r.comm_busy_ns.find(group);
    return it == r.comm_busy_ns.end() ? int64_t{0} : it->second;
  };
  row("comm in flight (any group)", each([&](const RankProfile& r) { return busy(r, ""); }), -1,
      step_ms);
  for (const auto& [group, unused] : groups)
    if (!group.empty())
      row("  " + group, each([&](const RankProfile& r) { return busy(r, group); }), -1, step_ms);
  double exposed = 0, in_flight = 0;
  for (const RankProfile& r : ranks) {
    exposed += static_cast<double>(r.wait_ns());
    in_flight += static_cast<double>(busy(r, ""));
  }
  if (in_flight > 0) {
    std::snprintf(line, sizeof line,
                  "communication: %.2f ms in flight per step and rank, %.2f ms of it exposed "
                  "(%.1f%%; %.1f%% hidden behind compute)\n",
                  in_flight / static_cast<double>(n) * per_step,
                  exposed / static_cast<double>(n) * per_step, 100.0 * exposed / in_flight,
                  100.0 * std::max(0.0, 1.0 - exposed / in_flight));
    text += line;
    if (exposed > in_flight)
      text +=
          "  (a wait lasts until its rank runs again: with more ranks and progress threads than "
          "CPUs, waking up takes long, and waits can outlast the ops they wait for)\n";
  } else {
    text += "communication: none traced (one rank, or a backend that does not report completion)\n";
  }
  const double seconds = slowest_step_ns * 1e-9;
  std::snprintf(line, sizeof line,
                "model FLOPs: %.3f GFLOP per step (6 N tokens + 12 L T d per token); achieved "
                "%.2f GFLOP/s over %zu rank%s, %.2f per rank (the slowest rank's step time)\n",
                flops_per_step * 1e-9,
                seconds > 0 ? flops_per_step * static_cast<double>(steps) / seconds * 1e-9 : 0.0, n,
                n > 1 ? "s" : "",
                seconds > 0 ? flops_per_step * static_cast<double>(steps) / seconds * 1e-9 /
                                  static_cast<double>(n)
                            : 0.0);
  text += line;
  return text;
}

}  // namespace meshtrain

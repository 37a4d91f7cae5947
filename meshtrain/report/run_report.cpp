#include "meshtrain/report/run_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "meshtrain/report/svg_chart.h"

namespace meshtrain {

namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

using nlohmann::json;

// One metrics line, read with the place it came from for every message.
class Line {
 public:
  Line(const std::string& path, size_t number, const json& j) : j_(j) {
    where_ = detail::concat("the metrics file '", path, "' line ", number);
  }
  const std::string& where() const { return where_; }

  // A number, or NaN for null (a value that was not finite) or, when optional, an absent key.
  double number(const char* key, bool required) const {
    const auto it = j_.find(key);
    if (it == j_.end()) {
      MT_CHECK(!required, where_, ": no \"", key, "\" (every line of a metrics file has one)");
      return kMissing;
    }
    if (it->is_null()) return kMissing;
    MT_CHECK(it->is_number(), where_, ": \"", key, "\" must be a number, got ", it->dump());
    return it->get<double>();
  }

  std::vector<double> numbers(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return {};
    MT_CHECK(it->is_array(), where_, ": \"", key, "\" must be an array of numbers, got ",
             it->dump());
    std::vector<double> out;
    for (const json& item : *it) {
      MT_CHECK(item.is_number() || item.is_null(), where_, ": \"", key,
               "\" must be an array of numbers, got ", it->dump());
      out.push_back(item.is_null() ? kMissing : item.get<double>());
    }
    return out;
  }

 private:
  const json& j_;
  std::string where_;
};

std::string shortened(const std::string& text) {
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string byte_text(double bytes) {
  if (!std::isfinite(bytes)) return "n/a";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return fixed(bytes, unit == 0 ? 0 : 1) + " " + units[unit];
}

// Valid UTF-8 kept, any other byte as U+FFFD, then escaped: a byte-level model's sample may hold
// any bytes.
std::string html_text(const std::string& text) {
  std::string valid;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok && n == 2) ok = c >= 0xC2;  // no overlong forms
    if (ok) {
      valid.append(text, i, n);
      i += n;
    } else {
      valid += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return xml_escape(valid);
}

double mean_of(const std::vector<double>& values, size_t from) {
  double sum = 0.0;
  size_t count = 0;
  for (size_t i = from; i < values.size(); ++i)
    if (std::isfinite(values[i])) {
      sum += values[i];
      ++count;
    }
  return count ? sum / static_cast<double>(count) : kMissing;
}

double last_finite(const std::vector<double>& values) {
  for (size_t i = values.size(); i-- > 0;)
    if (std::isfinite(values[i])) return values[i];
  return kMissing;
}

// The unit that shows `most` bytes as a number below 1024.
std::pair<double, const char*> byte_unit(double most) {
  if (most >= double(1ull << 30)) return {double(1ull << 30), "GiB"};
  if (most >= double(1ull << 20)) return {double(1ull << 20), "MiB"};
  if (most >= 1024.0) return {1024.0, "KiB"};
  return {1.0, "bytes"};
}

std::vector<double> scaled(const std::vector<double>& values, double factor) {
  std::vector<double> out(values);
  for (double& v : out) v *= factor;
  return out;
}

void row(std::string& out, const std::string& name, const std::string& value) {
  out += "<tr><th>" + xml_escape(name) + "</th><td>" + value + "</td></tr>\n";
}

std::string final_figures(const RunMetrics& m) {
  std::string out = "<table class=\"figures\">\n";
  const size_t n = m.size();
  row(out, "steps",
      std::to_string(n) +
          (n ? " (step " + fixed(m.step.front(), 0) + " to " + fixed(m.step.back(), 0) + ")" : ""));
  if (n == 0) return out + "</table>\n";
  size_t best = n;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(m.loss[i]) && (best == n || m.loss[i] < m.loss[best])) best = i;
  row(out, "loss",
      fixed(m.loss.front(), 4) + " &#8594; " + fixed(m.loss.back(), 4) +
          (best < n
               ? " (lowest " + fixed(m.loss[best], 4) + " at step " + fixed(m.step[best], 0) + ")"
               : ""));
  if (m.has_val_loss) row(out, "validation loss (last)", fixed(last_finite(m.val_loss), 4));
  // The first step warms caches and allocators: the means leave it out when there are others.
  const size_t from = n > 1 ? 1 : 0;
  row(out, "tokens/s (mean, last)",
      fixed(mean_of(m.tokens_per_s, from), 0) + ", " + fixed(m.tokens_per_s.back(), 0));
  double total = 0.0;
  for (const double t : m.step_time_s)
    if (std::isfinite(t)) total += t;
  row(out, "step time (mean)", fixed(mean_of(m.step_time_s, from) * 1e3, 1) + " ms");
  row(out, "exposed communication (mean)",
      fixed(mean_of(m.exposed_comm_s, from) * 1e3, 1) + " ms per step");
  if (m.has_bubble)
    row(out, "of which pipeline bubble (mean)",
        fixed(mean_of(m.bubble_s, from) * 1e3, 1) + " ms per step");
  row(out, "time in steps", fixed(total, 1) + " s");
  row(out, "communication (last step)", byte_text(m.comm_bytes.back()));
  double peak = kMissing;
  for (const double p : m.peak_mem_bytes)
    if (std::isfinite(p)) peak = std::isfinite(peak) ? std::max(peak, p) : p;
  row(out, "peak memory of a rank (last step, whole run)",
      byte_text(m.peak_mem_bytes.back()) + ", " + byte_text(peak));
  if (!m.peak_mem_per_rank.back().empty()) {
    std::string ranks;
    for (size_t r = 0; r < m.peak_mem_per_rank.back().size(); ++r)
      ranks += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " " +
               byte_text(m.peak_mem_per_rank.back()[r]);
    row(out, "peak memory per rank (last step)", ranks);
  }
  char lr[32];
  std::snprintf(lr, sizeof lr, "%g", m.lr.back());
  row(out, "learning rate (last)", std::isfinite(m.lr.back()) ? lr : "n/a");
  if (m.has_grad_norm) row(out, "gradient norm (last)", fixed(last_finite(m.grad_norm), 4));
  return out + "</table>\n";
}

std::string charts(const RunMetrics& m) {
  std::string out;
  const auto figure = [&](const std::string& svg) { out += "<figure>\n" + svg + "</figure>\n"; };
  std::vector<ChartSeries> loss = {{"training loss", m.step, m.loss}};
  if (m.has_val_loss) {  // computed every few steps: a line through those steps
    ChartSeries val{"validation loss", {}, {}, true};
    for (size_t i = 0; i < m.size(); ++i)
      if (std::isfinite(m.val_loss[i])) {
        val.x.push_back(m.step[i]);
        val.y.push_back(m.val_loss[i]);
      }
    loss.push_back(std::move(val));
  }
  figure(svg_line_chart(loss, {.title = "Loss", .x_label = "step", .y_label = "loss"}));
  figure(svg_line_chart(
      {{"tokens/s", m.step, m.tokens_per_s}},
      {.title = "Throughput", .x_label = "step", .y_label = "tokens/s", .y_from_zero = true}));
  // Exposed communication counts every wait, a pipeline's for other stages too: the bubble is
  // part of it, drawn beside it.
  std::vector<ChartSeries> time = {
      {"step time", m.step, scaled(m.step_time_s, 1e3)},
      {"exposed communication", m.step, scaled(m.exposed_comm_s, 1e3), true}};
  if (m.has_bubble)
    time.push_back({"of which pipeline bubble", m.step, scaled(m.bubble_s, 1e3), true});
  figure(svg_line_chart(
      time,
      {.title = "Step time", .x_label = "step", .y_label = "milliseconds", .y_from_zero = true}));
  // Peak memory: one line per rank where the lines carry them, else the largest rank's.
  size_t ranks = 0;
  double most = 0.0;
  for (size_t i = 0; i < m.size(); ++i) {
    ranks = std::max(ranks, m.peak_mem_per_rank[i].size());
    for (const double v : m.peak_mem_per_rank[i])
      if (std::isfinite(v)) most = std::max(most, v);
    if (std::isfinite(m.peak_mem_bytes[i])) most = std::max(most, m.peak_mem_bytes[i]);
  }
  const auto [unit, unit_name] = byte_unit(most);
  std::vector<ChartSeries> memory;
  if (ranks == 0) {
    memory.push_back({"largest rank", m.step, scaled(m.peak_mem_bytes, 1.0 / unit)});
  } else {
    for (size_t r = 0; r < ranks; ++r) {
      ChartSeries one{"rank " + std::to_string(r), m.step, {}};
      for (size_t i = 0; i < m.size(); ++i)
        one.y.push_back(r < m.peak_mem_per_rank[i].size() ? m.peak_mem_per_rank[i][r] / unit
                                                          : kMissing);
      memory.push_back(std::move(one));
    }
  }
  figure(svg_line_chart(memory, {.title = "Peak memory per rank",
                                 .x_label = "step",
                                 .y_label = std::string(unit_name),
                                 .y_from_zero = true}));
  return out;
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1340px}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "figure{display:inline-block;margin:8px;border:1px solid #ddd}"
    "table{border-collapse:collapse}th,td{text-align:left;padding:3px 10px;"
    "border-bottom:1px solid #eee;vertical-align:top}th{font-weight:normal;color:#555}"
    "pre{background:#f6f6f6;padding:10px;white-space:pre-wrap;max-width:1000px}";

}  // namespace

RunMetrics read_metrics_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw IoError(
        detail::concat("cannot open the metrics file '", path, "': ", std::strerror(errno)));
  RunMetrics m;
  m.path = path;
  size_t number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    const std::string where = detail::concat("the metrics file '", path, "' line ", number);
    MT_CHECK(!j.is_discarded() && j.is_object(), where,
             ": expected a JSON object (one per step, as meshtrain train --metrics writes), got '",
             shortened(text), "'");
    const Line line(path, number, j);
    const auto step = j.find("step");
    MT_CHECK(step != j.end() && step->is_number_integer() && step->get<int64_t>() >= 1, where,
             ": \"step\" must be a positive integer, got ",
             step == j.end() ? std::string("none") : step->dump());
    const double s = static_cast<double>(step->get<int64_t>());
    MT_CHECK(m.step.empty() || s > m.step.back(), where, ": step ", step->get<int64_t>(),
             " follows step ", static_cast<int64_t>(m.step.empty() ? 0 : m.step.back()),
             " (steps must increase)");
    m.step.push_back(s);
    m.loss.push_back(line.number("loss", true));
    m.val_loss.push_back(line.number("val_loss", false));
    m.has_val_loss = m.has_val_loss || j.contains("val_loss");
    m.lr.push_back(line.number("lr", false));
    m.step_time_s.push_back(line.number("step_time_s", false));
    m.tokens_per_s.push_back(line.number("tokens_per_s", false));
    m.exposed_comm_s.push_back(line.number("exposed_comm_s", false));
    m.bubble_s.push_back(line.number("bubble_s", false));
    m.has_bubble = m.has_bubble || j.contains("bubble_s");
    m.grad_norm.push_back(line.number("grad_norm", false));
    m.has_grad_norm = m.has_grad_norm || j.contains("grad_norm");
    m.comm_bytes.push_back(line.number("comm_bytes", false));
    m.peak_mem_bytes.push_back(line.number("peak_mem_bytes", false));
    m.peak_mem_per_rank.push_back(line.numbers("peak_mem_bytes_per_rank"));
  }
  if (in.bad()) throw IoError("cannot read the metrics file '" + path + "'");
  return m;
}

std::string run_report_html(const RunMetrics& m, const RunInfo& info) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<title>" + html_text(info.title) + "</title>\n<style>" + kStyle + "</style>\n";
  out += "</head>\n<body>\n<h1>" + html_text(info.title) + "</h1>\n";
  out += "<p>" + std::to_string(m.size()) + " step" + (m.size() == 1 ? "" : "s") +
         " from the metrics file <code>" + html_text(m.path) + "</code></p>\n";
  out += "<h2>Final figures</h2>\n" + final_figures(m);
  if (!info.settings.empty()) {
    out += "<h2>Run</h2>\n<table class=\"settings\">\n";
    for (const auto& [key, value] : info.settings) row(out, key, html_text(value));
    out += "</table>\n";
  }
  out += "<h2>Charts</h2>\n";
  if (m.size() == 0)
    out += "<p>No steps recorded.</p>\n";
  else
    out += charts(m);
  if (!info.config_text.empty())
    out +=
        "<h2>Configuration</h2>\n<pre class=\"config\">" + html_text(info.config_text) + "</pre>\n";
  if (!info.sample.empty())
    out += "<h2>Sample</h2>\n<pre class=\"sample\">" + html_text(info.sample) + "</pre>\n";
  out += "</body>\n</html>\n";
  return out;
}

std::string write_run_report(const std::string& metrics_path, const std::string& dir,
                             const RunInfo& info) {
  const RunMetrics metrics = read_metrics_file(metrics_path);
  const std::string html = run_report_html(metrics, info);
  MT_CHECK(!std::filesystem::exists(dir) || std::filesystem::is_directory(dir),
           "the report folder '", dir, "' exists and is not a folder");
  create_directories_synced(dir);
  const std::string path = (std::filesystem::path(dir) / "index.html").string();
  AtomicFile file(path);
  std::ofstream out(file.partial_path(), std::ios::binary | std::ios::trunc);
  errno = 0;
  out << html;
  out.close();
  if (!out)
    throw IoError(detail::concat("writing the report '", file.partial_path(),
                                 "' failed: ", std::strerror(errno)));
  file.commit();
  return path;
}

}  // namespace meshtrain

#include "meshtrain/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

constexpr size_t kMostLegendEntries = 8;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// [lo, hi] widened where it is a single value, so that the scale divides by a non-zero span.
void widen(double& lo, double& hi) {
  if (hi > lo) return;
  const double d = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
  lo -= d;
  hi += d;
}

}  // namespace

std::string_view series_color(size_t index) {
  static constexpr std::string_view palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                 "#bcbd22", "#17becf"};
  return palette[index % std::size(palette)];
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  MT_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && count >= 1,
           "nice_ticks: expected finite lo <= hi and a positive count, got [", lo, ", ", hi,
           "] and ", count);
  widen(lo, hi);
  const double rough = (hi - lo) / count;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  double step = power;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= rough) {
      step = m * power;
      break;
    }
  // Multiples of the step, so that no error accumulates.
  const double first = std::floor(lo / step), last = std::ceil(hi / step);
  std::vector<double> ticks;
  for (double i = first; i <= last; ++i) ticks.push_back(i * step == 0.0 ? 0.0 : i * step);
  return ticks;
}

std::string format_tick(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

ChartScale chart_scale(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  ChartScale s;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const ChartSeries& one : series) {
    MT_CHECK(one.x.size() == one.y.size(), "chart '", options.title, "': series '", one.name,
             "' has ", one.x.size(), " x values and ", one.y.size(), " y values");
    for (size_t i = 0; i < one.x.size(); ++i) {
      if (!std::isfinite(one.x[i]) || !std::isfinite(one.y[i])) continue;
      x_lo = std::min(x_lo, one.x[i]);
      x_hi = std::max(x_hi, one.x[i]);
      y_lo = std::min(y_lo, one.y[i]);
      y_hi = std::max(y_hi, one.y[i]);
    }
  }
  if (!(x_lo <= x_hi)) x_lo = x_hi = y_lo = y_hi = 0.0;  // nothing to draw
  if (options.y_from_zero) {
    y_lo = std::min(y_lo, 0.0);
    y_hi = std::max(y_hi, 0.0);
  }
  if (options.y_from_zero && y_lo == 0.0 && y_hi == 0.0) y_hi = 1.0;
  widen(x_lo, x_hi);
  widen(y_lo, y_hi);
  if (options.y_from_zero && y_lo < 0.0 && y_hi > 0.0 && y_lo > -y_hi) y_lo = 0.0;
  s.y_ticks = nice_ticks(y_lo, y_hi, 5);
  s.y_min = s.y_ticks.front();
  s.y_max = s.y_ticks.back();
  s.x_min = x_lo;
  s.x_max = x_hi;
  for (const double t : nice_ticks(x_lo, x_hi, 6))
    if (t >= x_lo && t <= x_hi) s.x_ticks.push_back(t);
  s.left = 70;
  s.right = options.width - 20;
  s.top = 48;
  s.bottom = options.height - 46;
  return s;
}

std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& options) {
  const ChartScale s = chart_scale(series, options);
  const std::string w = std::to_string(options.width), h = std::to_string(options.height);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\" role=\"img\" aria-label=\"" +
                    xml_escape(options.title) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<title>" + xml_escape(options.title) + "</title>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"#ffffff\"/>\n";
  out += "<text x=\"" + number(s.left) + "\" y=\"18\" font-size=\"13\" font-weight=\"bold\">" +
         xml_escape(options.title) + "</text>\n";
  // Grid and ticks.
  for (const double t : s.y_ticks) {
    const std::string y = number(s.py(t));
    out += "<line x1=\"" + number(s.left) + "\" y1=\"" + y + "\" x2=\"" + number(s.right) +
           "\" y2=\"" + y + "\" stroke=\"#e0e0e0\"/>\n";
    out += "<text x=\"" + number(s.left - 6) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + xml_escape(format_tick(t)) +
           "</text>\n";
  }
  for (const double t : s.x_ticks) {
    const std::string x = number(s.px(t));
    out += "<line x1=\"" + x + "\" y1=\"" + number(s.bottom) + "\" x2=\"" + x + "\" y2=\"" +
           number(s.bottom + 5) + "\" stroke=\"#333333\"/>\n";
    out += "<text x=\"" + x + "\" y=\"" + number(s.bottom + 17) + "\" text-anchor=\"middle\">" +
           xml_escape(format_tick(t)) + "</text>\n";
  }
  // Axes and their labels.
  out += "<polyline class=\"axes\" fill=\"none\" stroke=\"#333333\" points=\"" + number(s.left) +
         "," + number(s.top) + " " + number(s.left) + "," + number(s.bottom) + " " +
         number(s.right) + "," + number(s.bottom) + "\"/>\n";
  out += "<text x=\"" + number((s.left + s.right) / 2) + "\" y=\"" + number(options.height - 8) +
         "\" text-anchor=\"middle\">" + xml_escape(options.x_label) + "</text>\n";
  const std::string mid = number((s.top + s.bottom) / 2);
  out += "<text x=\"14\" y=\"" + mid + "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
         mid + ")\">" + xml_escape(options.y_label) + "</text>\n";
  // The series: one polyline per run of finite points, a dot for a lone point.
  for (size_t k = 0; k < series.size(); ++k) {
    const ChartSeries& one = series[k];
    const std::string color(series_color(k));
    const std::string look = "fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\"" +
                             (one.dashed ? " stroke-dasharray=\"5 3\"" : "");
    const std::string name = xml_escape(one.name);
    std::vector<std::string> run;
    const auto flush = [&] {
      if (run.size() == 1) {
        const size_t comma = run[0].find(',');
        out += "<circle data-series=\"" + name + "\" cx=\"" + run[0].substr(0, comma) + "\" cy=\"" +
               run[0].substr(comma + 1) + "\" r=\"3\" fill=\"" + color + "\"><title>" + name +
               "</title></circle>\n";
      } else if (run.size() > 1) {
        out += "<polyline data-series=\"" + name + "\" " + look + " points=\"";
        for (size_t i = 0; i < run.size(); ++i) out += (i ? " " : "") + run[i];
        out += "\"><title>" + name + "</title></polyline>\n";
      }
      run.clear();
    };
    for (size_t i = 0; i < one.x.size(); ++i) {
      if (std::isfinite(one.x[i]) && std::isfinite(one.y[i]))
        run.push_back(number(s.px(one.x[i])) + "," + number(s.py(one.y[i])));
      else
        flush();
    }
    flush();
  }
  // The legend, on one row under the title.
  if (series.size() > 1) {
    double x = s.left;
    for (size_t k = 0; k < series.size() && k < kMostLegendEntries; ++k) {
      out += "<line x1=\"" + number(x) + "\" y1=\"32\" x2=\"" + number(x + 16) +
             "\" y2=\"32\" stroke=\"" + std::string(series_color(k)) + "\" stroke-width=\"2\"" +
             (series[k].dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
      out += "<text x=\"" + number(x + 20) + "\" y=\"32\" dominant-baseline=\"middle\">" +
             xml_escape(series[k].name) + "</text>\n";
      x += 34 + 6.5 * static_cast<double>(series[k].name.size());
    }
    if (series.size() > kMostLegendEntries)
      out += "<text x=\"" + number(x) + "\" y=\"32\" dominant-baseline=\"middle\">and " +
             std::to_string(series.size() - kMostLegendEntries) + " more</text>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace meshtrain

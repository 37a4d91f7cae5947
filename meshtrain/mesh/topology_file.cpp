// The topology text format (docs/topology.md has the full description and an example):
//   # comment                      (from '#' to the end of the line; blank lines are ignored)
//   host   <name>
//   gpu    <name> <host>
//   nic    <name> <host>
//   switch <name>
//   link   <vertex> <vertex> <GB/s> <nvlink|pcie|ib|ethernet>
// Vertices must be declared before they are used; GPUs are numbered in the order declared.
#include <charconv>
#include <fstream>
#include <sstream>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/topology.h"

namespace meshtrain {

namespace {

std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> fields;
  std::istringstream in{std::string(line)};
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

double parse_bandwidth(const std::string& text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > 0))
    throw InvalidArgument("bandwidth '" + text + "' is not a positive number of GB/s");
  return value;
}

void apply_line(Topology& topology, const std::vector<std::string>& f) {
  const std::string& keyword = f[0];
  const auto expect = [&](size_t count, const char* usage) {
    if (f.size() != count)
      throw InvalidArgument(detail::concat("'", keyword, "' takes ", count - 1, " fields (",
                                           usage, "), got ", f.size() - 1));
  };
  if (keyword == "host") {
    expect(2, "host <name>");
    topology.add_host(f[1]);
  } else if (keyword == "gpu") {
    expect(3, "gpu <name> <host>");
    topology.add_gpu(f[1], f[2]);
  } else if (keyword == "nic") {
    expect(3, "nic <name> <host>");
    topology.add_nic(f[1], f[2]);
  } else if (keyword == "switch") {
    expect(2, "switch <name>");
    topology.add_switch(f[1]);
  } else if (keyword == "link") {
    expect(5, "link <vertex> <vertex> <GB/s> <kind>");
    const std::optional<LinkKind> kind = parse_link_kind(f[4]);
    if (!kind)
      throw InvalidArgument("unknown link kind '" + f[4] + "'; expected nvlink, pcie, ib or ethernet");
    topology.add_link(f[1], f[2], parse_bandwidth(f[3]), *kind);
  } else {
    throw InvalidArgument("unknown keyword '" + keyword +
                          "'; expected host, gpu, nic, switch or link");
  }
}

}  // namespace

Topology parse_topology(std::string_view text, const std::string& source) {
  Topology topology;
  int line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    line = line.substr(0, line.find('#'));
    const std::vector<std::string> fields = split_fields(line);
    if (fields.empty()) continue;
    try {
      apply_line(topology, fields);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(detail::concat(source, ":", line_number, ": ", e.what()));
    }
  }
  try {
    topology.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(source + ": " + e.what());
  }
  return topology;
}

Topology load_topology(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot open topology file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_topology(text.str(), path);
}

}  // namespace meshtrain

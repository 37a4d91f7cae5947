#include "meshtrain/mesh/topology.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <boost/graph/connected_components.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Keeps the links of at least a given bandwidth: the islands of GPUs that fast links join.
struct LinksAtLeast {
  const TopologyGraph* graph = nullptr;
  double gb_s = 0;
  bool operator()(TopologyGraph::edge_descriptor e) const { return (*graph)[e].gb_s >= gb_s; }
};

template <typename Graph>
std::vector<int> components(const Graph& g, size_t num_vertices) {
  std::vector<int> component(num_vertices);
  boost::connected_components(
      g, boost::make_iterator_property_map(component.begin(), get(boost::vertex_index, g)));
  return component;
}

}  // namespace

std::string_view link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::ib: return "ib";
    case LinkKind::ethernet: return "ethernet";
  }
  return "?";
}

std::optional<LinkKind> parse_link_kind(std::string_view name) {
  for (LinkKind k : {LinkKind::nvlink, LinkKind::pcie, LinkKind::ib, LinkKind::ethernet})
    if (link_kind_name(k) == name) return k;
  return std::nullopt;
}

Topology Topology::cluster(int nodes, int gpus_per_node, double nvlink_gb_s, double ib_gb_s,
                           double pcie_gb_s) {
  MT_CHECK(nodes >= 1 && gpus_per_node >= 1, "cluster of ", nodes, " nodes with ", gpus_per_node,
           " GPUs each; both must be at least 1");
  Topology t;
  t.add_switch("fabric");
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "node" + std::to_string(n);
    t.add_host(node);
    t.add_switch(node + "/nvswitch");
    t.add_nic(node + "/nic", node);
    t.add_link(node, node + "/nic", pcie_gb_s, LinkKind::pcie);
    t.add_link(node + "/nic", "fabric", ib_gb_s, LinkKind::ib);
    for (int g = 0; g < gpus_per_node; ++g) {
      const std::string gpu = node + "/gpu" + std::to_string(g);
      t.add_gpu(gpu, node);
      t.add_link(gpu, node + "/nvswitch", nvlink_gb_s, LinkKind::nvlink);
      t.add_link(gpu, node, pcie_gb_s, LinkKind::pcie);
    }
  }
  return t;
}

int Topology::add_vertex(const std::string& name, VertexKind kind, int host) {
  if (name.empty()) throw InvalidArgument("a topology vertex needs a name");
  if (by_name_.contains(name)) throw InvalidArgument("vertex '" + name + "' declared twice");
  const int v = static_cast<int>(boost::add_vertex(TopologyVertex{name, kind, host}, graph_));
  by_name_.emplace(name, v);
  return v;
}

int Topology::vertex(const std::string& name, std::string_view role) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end())
    throw InvalidArgument(detail::concat("unknown ", role, " '", name,
                                         "' (declare it first with host, gpu, nic or switch)"));
  return it->second;
}

int Topology::add_host(const std::string& name) { return add_vertex(name, VertexKind::host, -1); }

int Topology::add_gpu(const std::string& name, const std::string& host) {
  const int h = vertex(host, "host");
  if (graph_[h].kind != VertexKind::host)
    throw InvalidArgument("gpu '" + name + "': '" + host + "' is not a host");
  const int v = add_vertex(name, VertexKind::gpu, h);
  gpus_.push_back(v);
  return v;
}

int Topology::add_nic(const std::string& name, const std::string& host) {
  const int h = vertex(host, "host");
  if (graph_[h].kind != VertexKind::host)
    throw InvalidArgument("nic '" + name + "': '" + host + "' is not a host");
  return add_vertex(name, VertexKind::nic, h);
}

int Topology::add_switch(const std::string& name) {
  return add_vertex(name, VertexKind::network_switch, -1);
}

void Topology::add_link(const std::string& a, const std::string& b, double gb_s, LinkKind kind) {
  const int u = vertex(a, "vertex"), v = vertex(b, "vertex");
  if (u == v) throw InvalidArgument("link from '" + a + "' to itself");
  if (!(gb_s > 0 && gb_s < kInfinite))
    throw InvalidArgument(detail::concat("link '", a, "' - '", b, "': bandwidth ", gb_s,
                                         " GB/s must be a positive number"));
  boost::add_edge(u, v, TopologyLink{gb_s, kind}, graph_);
}

void Topology::validate() const {
  if (gpus_.empty()) throw InvalidArgument("the topology has no gpu");
  const std::vector<int> component = components(graph_, boost::num_vertices(graph_));
  for (int v : gpus_)
    if (component[v] != component[gpus_[0]])
      throw InvalidArgument("gpu '" + graph_[v].name + "' cannot reach gpu '" +
                            graph_[gpus_[0]].name + "': no path of links joins them");
}

const std::string& Topology::gpu_name(int gpu) const {
  MT_CHECK(gpu >= 0 && gpu < num_gpus(), "gpu ", gpu, " is outside a topology with ", num_gpus(),
           " GPUs");
  return graph_[gpus_[gpu]].name;
}

int Topology::gpu_index(std::string_view name) const {
  for (int i = 0; i < num_gpus(); ++i)
    if (graph_[gpus_[i]].name == name) return i;
  throw InvalidArgument(detail::concat("the topology has no gpu '", name, "'"));
}

PathBottleneck Topology::bottleneck(int gpu_a, int gpu_b) const {
  gpu_name(gpu_a);
  gpu_name(gpu_b);
  MT_CHECK(gpu_a != gpu_b, "bottleneck needs two different gpus, got gpu ", gpu_a, " twice");
  const size_t n = boost::num_vertices(graph_);
  std::vector<double> width(n);
  std::vector<TopologyGraph::vertex_descriptor> pred(n);
  const auto index = get(boost::vertex_index, graph_);
  // Dijkstra on the (max, min) semiring: a path is as wide as its narrowest link, and the widest
  // path wins. Unreached vertices keep width 0; the source is infinitely wide.
  boost::dijkstra_shortest_paths(
      graph_, gpus_[gpu_a],
      boost::weight_map(get(&TopologyLink::gb_s, graph_))
          .predecessor_map(boost::make_iterator_property_map(pred.begin(), index))
          .distance_map(boost::make_iterator_property_map(width.begin(), index))
          .distance_compare(std::greater<double>())
          .distance_combine([](double a, double b) { return std::min(a, b); })
          .distance_inf(0.0)
          .distance_zero(kInfinite));
  const auto target = static_cast<TopologyGraph::vertex_descriptor>(gpus_[gpu_b]);
  if (width[target] <= 0)
    throw InvalidArgument("gpu '" + gpu_name(gpu_a) + "' cannot reach gpu '" + gpu_name(gpu_b) +
                          "'");
  // Walk the path back to name the kind of its narrowest link.
  PathBottleneck result{kInfinite, LinkKind::nvlink};
  for (auto v = target; v != pred[v];) {
    const auto u = pred[v];
    const TopologyLink* best = nullptr;  // parallel links: the widest one carried the path
    for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e)
      if (boost::target(*e, graph_) == v && (!best || graph_[*e].gb_s > best->gb_s))
        best = &graph_[*e];
    if (best->gb_s < result.gb_s) result = {best->gb_s, best->kind};
    v = u;
  }
  return result;
}

std::vector<int> Topology::locality_order() const {
  std::vector<double> bandwidths;
  for (auto [e, end] = boost::edges(graph_); e != end; ++e) bandwidths.push_back(graph_[*e].gb_s);
  std::sort(bandwidths.begin(), bandwidths.end());
  bandwidths.erase(std::unique(bandwidths.begin(), bandwidths.end()), bandwidths.end());
  // Key of a GPU: its island at each threshold, slowest first, then its own index. Islands at a
  // higher threshold nest inside those at a lower one, so sorting by the key keeps them contiguous.
  std::vector<std::vector<int>> keys(gpus_.size());
  for (double t : bandwidths) {
    boost::filtered_graph<TopologyGraph, LinksAtLeast> fast(graph_, LinksAtLeast{&graph_, t});
    const std::vector<int> component = components(fast, boost::num_vertices(graph_));
    for (size_t i = 0; i < gpus_.size(); ++i) keys[i].push_back(component[gpus_[i]]);
  }
  for (size_t i = 0; i < gpus_.size(); ++i) keys[i].push_back(static_cast<int>(i));
  std::vector<int> order(gpus_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  return order;
}

}  // namespace meshtrain

// Topology: the physical machine as a Boost.Graph of hosts, GPUs, NICs and switches joined by
// undirected links with a bandwidth (GB/s) and a kind (NVLink inside a node; PCIe to the host and
// NIC; InfiniBand or Ethernet across nodes). Built in code (cluster(), the add_* calls) or read
// from the text format of parse_topology() (topology_file.cpp, docs/topology.md).
//
// Bandwidths between GPUs are widest-path ("maximal bottleneck") bandwidths: the best over all
// paths of the narrowest link on the path. Contention between concurrent transfers is not modelled.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

namespace meshtrain {

enum class LinkKind { nvlink, pcie, ib, ethernet };
std::string_view link_kind_name(LinkKind kind);
std::optional<LinkKind> parse_link_kind(std::string_view name);

enum class VertexKind { host, gpu, nic, network_switch };

struct TopologyVertex {
  std::string name;
  VertexKind kind = VertexKind::host;
  int host = -1;  // for a gpu or nic: the vertex of its host
};

struct TopologyLink {
  double gb_s = 0;
  LinkKind kind = LinkKind::nvlink;
};

using TopologyGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                                            TopologyVertex, TopologyLink>;

// The narrowest link of the widest path between two GPUs.
struct PathBottleneck {
  double gb_s = 0;
  LinkKind kind = LinkKind::nvlink;
};

class Topology {
 public:
  // nodes hosts of gpus_per_node GPUs; inside a node every GPU reaches an NVSwitch at nvlink_gb_s;
  // each GPU reaches its host over PCIe (pcie_gb_s), the host a NIC over PCIe, and every NIC a
  // fabric switch at ib_gb_s. GPUs are named "node<n>/gpu<g>".
  static Topology cluster(int nodes, int gpus_per_node, double nvlink_gb_s, double ib_gb_s,
                          double pcie_gb_s = 64);

  // Builders; names must be unique, a gpu's or nic's host must exist, bandwidths positive.
  // They throw InvalidArgument with a message that names the offending vertex.
  int add_host(const std::string& name);
  int add_gpu(const std::string& name, const std::string& host);
  int add_nic(const std::string& name, const std::string& host);
  int add_switch(const std::string& name);
  void add_link(const std::string& a, const std::string& b, double gb_s, LinkKind kind);

  // Throws InvalidArgument unless there is a GPU and every GPU can reach every other.
  void validate() const;

  const TopologyGraph& graph() const { return graph_; }
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  // GPUs are numbered 0..num_gpus()-1 in the order they were added.
  const std::string& gpu_name(int gpu) const;
  int gpu_index(std::string_view name) const;

  PathBottleneck bottleneck(int gpu_a, int gpu_b) const;

  // All GPUs, ordered so that for every bandwidth t the GPUs joined by links of at least t form
  // contiguous runs (fastest islands innermost), ties kept in the order the GPUs were added.
  std::vector<int> locality_order() const;

 private:
  int add_vertex(const std::string& name, VertexKind kind, int host);
  int vertex(const std::string& name, std::string_view role) const;

  TopologyGraph graph_;
  std::map<std::string, int, std::less<>> by_name_;
  std::vector<int> gpus_;  // vertex of each GPU
};

// Reads the text format described in docs/topology.md; errors start with "<source>:<line>: ".
Topology parse_topology(std::string_view text, const std::string& source = "topology");
// parse_topology() of a file's contents; IoError when it cannot be read.
Topology load_topology(const std::string& path);

}  // namespace meshtrain

// Bandwidth of a collective as nccl-tests reports it. "size" is the full buffer: all_reduce's
// buffer, all_gather's output, reduce_scatter's input. algbw = size / time; busbw = algbw times
// the collective's factor, the share of the buffer each rank moves over its link in the
// bandwidth-optimal algorithm, so that busbw is comparable across world sizes and to the link.
#pragma once

#include <cstddef>
#include <string_view>

#include "meshtrain/core/comm/types.h"

namespace meshtrain::bench {

struct CollectiveDescriptor {
  CommOp op;
  std::string_view name;
  double (*bus_factor)(int world_size);
};

inline constexpr CollectiveDescriptor kAllReduce{
    CommOp::all_reduce, "all_reduce", [](int w) { return 2.0 * (w - 1) / w; }};
inline constexpr CollectiveDescriptor kAllGather{
    CommOp::all_gather, "all_gather", [](int w) { return static_cast<double>(w - 1) / w; }};
inline constexpr CollectiveDescriptor kReduceScatter{
    CommOp::reduce_scatter, "reduce_scatter", [](int w) { return static_cast<double>(w - 1) / w; }};

struct Bandwidth {
  double algbw_gbps;  // GB/s, 1e9 bytes as in nccl-tests
  double busbw_gbps;
};

inline Bandwidth bandwidth(const CollectiveDescriptor& collective, int world_size,
                           double size_bytes, double seconds) {
  const double algbw = size_bytes / seconds / 1e9;
  return {algbw, algbw * collective.bus_factor(world_size)};
}

}  // namespace meshtrain::bench

// The one place that says how a dimension of n elements is split over `parts` shards: ceil-div
// chunks, so every shard but the trailing ones holds chunk = ceil(n / parts) elements and trailing
// shards may be smaller or empty (10 over 4 -> 3,3,3,1; 2 over 4 -> 1,1,0,0), as torch.chunk and
// FSDP2 do. Collectives then move `chunk` elements per rank, the short shards padded.
#pragma once

#include <algorithm>
#include <cstdint>

#include "meshtrain/core/error.h"

namespace meshtrain {

struct ShardRange {
  int64_t offset = 0;
  int64_t size = 0;
  bool operator==(const ShardRange&) const = default;
};

inline int64_t shard_chunk(int64_t n, int parts) {
  MT_CHECK(n >= 0, "shard_chunk: the element count must not be negative, got ", n);
  MT_CHECK(parts >= 1, "shard_chunk: the shard count must be at least 1, got ", parts);
  return (n + parts - 1) / parts;
}

inline ShardRange shard_range(int64_t n, int parts, int index) {
  MT_CHECK(index >= 0 && index < parts, "shard index ", index, " outside ", parts, " shards");
  const int64_t chunk = shard_chunk(n, parts);
  const int64_t begin = std::min(n, chunk * index);
  return {begin, std::min(n, begin + chunk) - begin};
}

}  // namespace meshtrain

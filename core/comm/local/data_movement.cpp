#include "core/comm/local/data_movement.h"

#include <cstring>
#include <vector>

#include "core/comm/local/reduce.h"

namespace meshtrain::local {

namespace {

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

void copy(char* to, const char* from, size_t bytes) {
  if (bytes > 0 && to != from) std::memcpy(to, from, bytes);
}

int group_size(const Slot& slot) { return static_cast<int>(slot.posts.size()); }

// Element range of all-reduce chunk c: W nearly equal pieces of the buffer.
struct Range {
  int64_t begin, count;
};
Range chunk(int64_t numel, int world, int c) {
  const int64_t begin = numel * c / world;
  return {begin, numel * (c + 1) / world - begin};
}

}  // namespace

// Peers are visited starting after my own rank so that ranks do not all read one source at once.
void gather_from_peers(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const size_t n = slot.signature.bytes;
  char* out = bytes_of(slot.posts[rank].out);
  for (int k = 0; k < w; ++k) {
    const int src = (rank + k) % w;
    copy(out + src * n, bytes_of(slot.posts[src].in), n);
  }
}

void reduce_my_chunk(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const Tensor& out = slot.posts[rank].out;
  std::vector<const void*> srcs(w);
  for (int j = 0; j < w; ++j) srcs[j] = bytes_of(slot.posts[j].in) + rank * out.nbytes();
  reduce_into(out.raw_data(), srcs.data(), w, out.numel(), out.dtype(), slot.signature.reduce);
}

void all_reduce_reduce_phase(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const Tensor& mine = slot.posts[rank].out;
  const size_t element = dtype_size(mine.dtype());
  const Range range = chunk(mine.numel(), w, rank);
  std::vector<const void*> srcs(w);
  for (int j = 0; j < w; ++j) srcs[j] = bytes_of(slot.posts[j].out) + range.begin * element;
  reduce_into(bytes_of(mine) + range.begin * element, srcs.data(), w, range.count, mine.dtype(),
              slot.signature.reduce);
}

void all_reduce_gather_phase(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const Tensor& mine = slot.posts[rank].out;
  const size_t element = dtype_size(mine.dtype());
  for (int k = 1; k < w; ++k) {
    const int c = (rank + k) % w;
    const Range range = chunk(mine.numel(), w, c);
    const size_t offset = range.begin * element;
    copy(bytes_of(mine) + offset, bytes_of(slot.posts[c].out) + offset, range.count * element);
  }
}

void copy_from_root(const Slot& slot, int rank) {
  const int root = slot.signature.root;
  if (rank == root) return;
  copy(bytes_of(slot.posts[rank].out), bytes_of(slot.posts[root].out), slot.signature.bytes);
}

void exchange_chunks(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const size_t m = slot.signature.bytes / w;
  char* out = bytes_of(slot.posts[rank].out);
  for (int k = 0; k < w; ++k) {
    const int src = (rank + k) % w;
    copy(out + src * m, bytes_of(slot.posts[src].in) + rank * m, m);
  }
}

}  // namespace meshtrain::local

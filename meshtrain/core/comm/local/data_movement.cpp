#include "meshtrain/core/comm/local/data_movement.h"

#include <cstring>
#include <vector>

#include "meshtrain/core/comm/local/reduce.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/config.h"
#if MESHTRAIN_HAS_CUDA
#include "meshtrain/core/ops/cuda/reduce_buffers.h"
#endif

namespace meshtrain::local {

namespace {

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

// Host buffers by memcpy; device buffers on the calling thread's stream (peer copies included).
void copy(const Tensor& to, size_t to_offset, const Tensor& from, size_t from_offset,
          size_t bytes) {
  if (to.device().is_meta()) return;  // shape-only: nothing to move
  char* dst = bytes_of(to) + to_offset;
  const char* src = bytes_of(from) + from_offset;
  if (bytes == 0 || dst == src) return;
  if (to.device().is_cpu() && from.device().is_cpu())
    std::memcpy(dst, src, bytes);
  else
    device_memcpy(dst, to.device(), src, from.device(), bytes);
}

// out[begin, begin + n) <- reduction over ranks j of srcs[j][begin, begin + n) (element offsets),
// computed on `where`: out's device, or, for a host out (offload's copy-out), this rank's GPU,
// whose stream waited for every rank's issue, so that one reduced chunk crosses to the host, not
// W. A source on another device than the reduction's is copied there first.
void reduce_range(const Tensor& out, int64_t out_begin, const std::vector<Tensor>& srcs,
                  int64_t src_begin, int64_t n, ReduceOp op, Device where) {
  if (out.device().is_meta()) return;  // shape-only: nothing to reduce
  const size_t element = dtype_size(out.dtype());
  if (where != out.device()) {
    const Tensor reduced = Tensor::empty({n}, out.dtype(), where);
    reduce_range(reduced, 0, srcs, src_begin, n, op, where);
    copy(out, out_begin * element, reduced, 0, n * element);  // waits: out is on the host
    return;
  }
  std::vector<Tensor> staged;  // keeps the staging copies alive until the reduction is queued
  std::vector<const void*> ptrs;
  for (const Tensor& src : srcs) {
    if (src.device() == out.device()) {
      ptrs.push_back(bytes_of(src) + src_begin * element);
      continue;
    }
    staged.push_back(Tensor::empty({n}, out.dtype(), out.device()));
    copy(staged.back(), 0, src, src_begin * element, n * element);
    ptrs.push_back(staged.back().raw_data());
  }
  void* dst = bytes_of(out) + out_begin * element;
  const int count = static_cast<int>(ptrs.size());
  if (out.device().is_cpu()) return reduce_into(dst, ptrs.data(), count, n, out.dtype(), op);
#if MESHTRAIN_HAS_CUDA
  ops::cuda::reduce_buffers(out.device().index, dst, ptrs.data(), count, n, out.dtype(), op);
  // The staging buffers go back to the allocator only once the reduction has read them.
  if (!staged.empty()) device_synchronize(out.device());
#endif
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

// Every rank's `in` (or `out`) buffer, by rank.
std::vector<Tensor> buffers(const Slot& slot, Tensor Post::*which) {
  std::vector<Tensor> all;
  for (const Post& post : slot.posts) all.push_back(post.*which);
  return all;
}

}  // namespace

Device device_of(const Tensor& in, const Tensor& out) {
  if (out.defined() && out.device().is_cuda()) return out.device();
  if (in.defined() && in.device().is_cuda()) return in.device();
  if (out.defined() && out.device().is_meta()) return out.device();
  return Device::cpu();
}

// Peers are visited starting after my own rank so that ranks do not all read one source at once.
void gather_from_peers(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const size_t n = slot.signature.bytes;
  const Tensor& out = slot.posts[rank].out;
  for (int k = 0; k < w; ++k) {
    const int src = (rank + k) % w;
    copy(out, src * n, slot.posts[src].in, 0, n);
  }
}

void reduce_my_chunk(const Slot& slot, int rank) {
  const Post& mine = slot.posts[rank];
  reduce_range(mine.out, 0, buffers(slot, &Post::in), rank * mine.out.numel(), mine.out.numel(),
               slot.signature.reduce, device_of(mine.in, mine.out));
}

void all_reduce_reduce_phase(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const Tensor& mine = slot.posts[rank].out;
  const Range range = chunk(mine.numel(), w, rank);
  reduce_range(mine, range.begin, buffers(slot, &Post::out), range.begin, range.count,
               slot.signature.reduce, mine.device());
}

void all_reduce_gather_phase(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const Tensor& mine = slot.posts[rank].out;
  const size_t element = dtype_size(mine.dtype());
  for (int k = 1; k < w; ++k) {
    const int c = (rank + k) % w;
    const Range range = chunk(mine.numel(), w, c);
    const size_t offset = range.begin * element;
    copy(mine, offset, slot.posts[c].out, offset, range.count * element);
  }
}

void copy_from_root(const Slot& slot, int rank) {
  const int root = slot.signature.root;
  if (rank == root) return;
  copy(slot.posts[rank].out, 0, slot.posts[root].out, 0, slot.signature.bytes);
}

void exchange_chunks(const Slot& slot, int rank) {
  const int w = group_size(slot);
  const size_t m = slot.signature.bytes / w;
  const Tensor& out = slot.posts[rank].out;
  for (int k = 0; k < w; ++k) {
    const int src = (rank + k) % w;
    copy(out, src * m, slot.posts[src].in, rank * m, m);
  }
}

}  // namespace meshtrain::local

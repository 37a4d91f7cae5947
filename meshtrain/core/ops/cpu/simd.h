// What the CPU kernels need to vectorise portably. The project builds for baseline x86-64 (SSE2);
// MT_CLONES compiles a hot function three times (AVX-512, AVX2, baseline) and picks one when the
// program loads (GCC function multiversioning: an ifunc, no per-call test). A cloned function's
// loops use the clone's instruction set only where their code is inlined into it, so the helpers
// here are MT_INLINE and the clones take raw pointers (templates on the storage type, float or
// BF16, inline into one clone per type). Rules the kernels follow so that GCC vectorises and the
// results stay the same on every clone and thread count:
//  - f32 math in registers: load() widens f32 / bf16 storage to f32, store() rounds f32 to bf16
//    to nearest even (NaN stays NaN), both branch-free;
//  - reductions go through explicit lanes (LaneSum): a fixed number of partial sums combined in a
//    fixed order, since GCC may not reorder a floating-point sum itself; the lane count does not
//    depend on the vector width, so every clone adds in the same order;
//  - GCC contracts a * b + c into FMA where the clone has it (-ffp-contract=fast, its default for
//    C++), so the AVX-512 clone may round differently from the others in the last bit; a machine
//    always runs the same clone, so results still do not change from run to run or with threads.
#pragma once

#include <bit>
#include <cstdint>

#include "meshtrain/core/bf16.h"

// Not in sanitizer builds: the clones' resolvers run while the program is being loaded, before
// the sanitizer's runtime, and instrumented they crash it (ThreadSanitizer did, in every test).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define MT_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define MT_CLONES
#endif
#define MT_INLINE inline __attribute__((always_inline))
// Before a loop over the kLanes lanes: kept a loop, GCC's loop vectoriser turns it into whole
// vectors; unrolled first, it would be left to the SLP vectoriser, which keeps a max (a compare
// and select) scalar.
#if defined(__GNUC__)
#define MT_LANE_LOOP _Pragma("GCC unroll 1")
#else
#define MT_LANE_LOOP
#endif

namespace meshtrain::ops::cpu {

MT_INLINE float load(float value) { return value; }
MT_INLINE float load(BF16 value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16);
}

// f32 -> bf16 as to_bf16 (meshtrain/core/bf16.h), written with selects so that it vectorises.
MT_INLINE BF16 round_bf16(float value) {
  const uint32_t u = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return BF16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

MT_INLINE void store(float& dst, float value) { dst = value; }
MT_INLINE void store(BF16& dst, float value) { dst = round_bf16(value); }

// A float sum over explicit lanes: element i goes to lane i % kLanes, the lanes are combined
// pairwise in a fixed order. add_block() takes kLanes consecutive values at a time; lane_sum()
// adds the rest (fewer than kLanes) into the first lanes.
template <typename Acc = float>
struct LaneSum {
  static constexpr int kLanes = 16;
  Acc lane[kLanes] = {};

  template <typename F>
  MT_INLINE void add_block(int64_t base, F&& value) {
    MT_LANE_LOOP
    for (int j = 0; j < kLanes; ++j) lane[j] += value(base + j);
  }
  MT_INLINE Acc total() {
    for (int width = kLanes / 2; width >= 1; width /= 2)
      for (int j = 0; j < width; ++j) lane[j] += lane[j + width];
    return lane[0];
  }
};

// sum_{i < n} value(i) through LaneSum, in Acc: the same result for every clone.
template <typename Acc = float, typename F>
MT_INLINE Acc lane_sum(int64_t n, F&& value) {
  LaneSum<Acc> sum;
  int64_t i = 0;
  for (; i + LaneSum<Acc>::kLanes <= n; i += LaneSum<Acc>::kLanes) sum.add_block(i, value);
  for (int j = 0; i + j < n; ++j) sum.lane[j] += value(i + j);
  return sum.total();
}

// max_{i < n} value(i) for n >= 1 (a NaN may or may not win, as with std::max_element).
template <typename F>
MT_INLINE float lane_max(int64_t n, F&& value) {
  constexpr int kLanes = LaneSum<>::kLanes;
  float lane[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = value(0);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    MT_LANE_LOOP
    for (int j = 0; j < kLanes; ++j) {
      const float v = value(i + j);
      lane[j] = v > lane[j] ? v : lane[j];
    }
  }
  for (int j = 0; i + j < n; ++j) {
    const float v = value(i + j);
    lane[j] = v > lane[j] ? v : lane[j];
  }
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j + width] > lane[j] ? lane[j + width] : lane[j];
  return lane[0];
}

}  // namespace meshtrain::ops::cpu

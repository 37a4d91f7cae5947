// Counter-based random numbers written out in full, so that initial weights and samples are the
// same on every platform and standard library, and any slice of a tensor can be generated alone
// (a sharded rank initialises just its shard and gets exactly the single-rank values).
#pragma once

#include <cstdint>
#include <string_view>

namespace meshtrain {

// SplitMix64's finaliser: a bijective mix of 64 bits.
uint64_t mix64(uint64_t x);
// 64-bit FNV-1a of bytes: a parameter's stream (the hash of its name), a data file's fingerprint.
// Passing the hash of what came before continues it, so that a long stream hashes in chunks.
inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64Basis);

// Fills out[0..count) with elements first..first+count-1 of the standard normal sequence of
// (seed, stream), scaled by stddev. Element i comes from Box-Muller over pair i / 2.
void fill_normal(float* out, int64_t count, uint64_t seed, uint64_t stream, int64_t first,
                 float stddev);

// A sequential generator (SplitMix64) for sampling.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform();  // in [0, 1)

 private:
  uint64_t state_;
};

}  // namespace meshtrain

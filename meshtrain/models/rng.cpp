#include "meshtrain/models/rng.h"

#include <cmath>

namespace meshtrain {

namespace {
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
}  // namespace

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

void fill_normal(float* out, int64_t count, uint64_t seed, uint64_t stream, int64_t first,
                 float stddev) {
  // Float math throughout: a 124M-parameter model initialises in about a second.
  const uint64_t key = mix64(seed ^ mix64(stream + kGolden));
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (int64_t i = 0; i < count;) {
    const int64_t element = first + i;
    const auto pair = static_cast<uint64_t>(element / 2);
    // u1 in (0, 1] so that its log is finite; u2 in [0, 1).
    const float u1 =
        static_cast<float>((mix64(key + (2 * pair + 1) * kGolden) >> 40) + 1) * 0x1.0p-24f;
    const float u2 = static_cast<float>(mix64(key + (2 * pair + 2) * kGolden) >> 40) * 0x1.0p-24f;
    const float radius = stddev * std::sqrt(-2.0f * std::log(u1));
    const float angle = kTwoPi * u2;
    const float cosine = std::cos(angle), sine = std::sin(angle);
    if (element % 2 == 0) {
      out[i++] = radius * cosine;
      if (i == count) break;
    }
    out[i++] = radius * sine;
  }
}

uint64_t Rng::next_u64() {
  state_ += kGolden;
  return mix64(state_);
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

}  // namespace meshtrain

// bfloat16 storage and conversions. f32 -> bf16 rounds to nearest, ties to even; NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace meshtrain {

struct BF16 {
  uint16_t bits;
};

inline BF16 to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BF16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // quiet NaN
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return BF16{static_cast<uint16_t>((u + rounding_bias) >> 16)};
}

inline float to_f32(BF16 value) {
  const uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace meshtrain

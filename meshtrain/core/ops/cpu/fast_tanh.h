// tanh for f32 without branches or library calls, so that the loops calling it vectorise: through
// e^(2|u|), by Cody-Waite range reduction to r in [-ln 2 / 2, ln 2 / 2], a degree-6 polynomial for
// e^r and 2^n put into the exponent bits. |fast_tanh(u) - tanh(u)| stays below 2e-7 for every u
// (tests/ops/gelu_test.cpp scans it), against GELU's scalar tanhf, which took a fifth of a training
// step on one core.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace meshtrain::ops::cpu {

// Always inlined: a cloned kernel (simd.h) vectorises it only as part of its own loop.
inline __attribute__((always_inline)) float fast_tanh(float u) {
  // tanh(20) is 1 in f32: clamping keeps 2^n finite.
  const float a = std::min(2.0f * std::fabs(u), 40.0f);
  // n = round(a / ln 2) by the 1.5 * 2^23 trick (round to nearest, exact for |a / ln 2| < 2^22).
  const float n = (a * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (a - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 split in two for accuracy
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_to_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float t = 1.0f - 2.0f / (p * two_to_n + 1.0f);
  return std::copysign(t, u);
}

}  // namespace meshtrain::ops::cpu

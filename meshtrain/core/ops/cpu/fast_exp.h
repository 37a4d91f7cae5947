// e^x for f32 without branches or library calls, so that the softmax and cross-entropy loops
// calling it vectorise (std::exp stays a scalar call): Cody-Waite range reduction to
// r in [-ln 2 / 2, ln 2 / 2], Cephes' degree-7 minimax polynomial for e^r, and 2^n put into the
// exponent bits. Relative error below 2.5e-7 (about 2 ulp) for x in [-87.3, 88.7]
// (tests/ops/cross_entropy_test.cpp scans it). Results below 2^-126 (x < -87.3365) are flushed
// to +0 (their true value is under 1.2e-38); x > 88.7228 gives +inf; NaN stays NaN.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

namespace meshtrain::ops::cpu {

// Always inlined: a cloned kernel (simd.h) vectorises it only as part of its own loop.
inline __attribute__((always_inline)) float fast_exp(float x) {
  constexpr float kLow = -87.33654f;  // ln(2^-126): n stays >= -126, a normal 2^n
  constexpr float kHigh = 88.72283f;  // ln(FLT_MAX)
  // Clamped, and a NaN becomes kLow, so that the conversion to int below is always defined.
  const float a = std::min(kHigh, std::max(kLow, x));
  // n = round(a / ln 2) by the 1.5 * 2^23 trick; |n| <= 128.
  const float n = (a * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (a - n * 0.693359375f) + n * 2.12194440e-4f;  // ln 2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = (p * (r * r) + r) + 1.0f;
  // 2^n for n <= 127 in the exponent bits; n = 128 (x near ln FLT_MAX) as 2^127 * 2.
  const int32_t ni = static_cast<int32_t>(n);
  const float two_to_n = std::bit_cast<float>((std::min(ni, 127) + 127) << 23);
  float y = e * two_to_n;
  y = ni > 127 ? y * 2.0f : y;
  y = x < kLow ? 0.0f : y;
  y = x > kHigh ? std::numeric_limits<float>::infinity() : y;
  return x == x ? y : x;
}

}  // namespace meshtrain::ops::cpu

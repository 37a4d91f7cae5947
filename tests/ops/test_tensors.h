// Small helpers for kernel tests: reproducible random tensors and element-wise comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "meshtrain/core/tensor.h"

namespace meshtrain::test {

// Uniform values in [lo, hi), the same for the same seed.
inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = dist(gen);
  return Tensor::from_vector(values, shape);
}

// Every element of `actual` within `tol` of the reference value at the same index.
inline void expect_all_near(const Tensor& actual, const std::vector<double>& expected, double tol,
                            const std::string& what) {
  const std::vector<float> got = actual.to_vector();
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], tol) << what << " at element " << i;
}

}  // namespace meshtrain::test

// What the decoder and sampling tests share: a small GPT-2, reproducible token ids, the full
// forward's logits the decoders are checked against, and the comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/parallel/engine.h"
#include "meshtrain/parallel/micro_batch.h"

namespace meshtrain::test {

inline const GPT2Config kSmallDecoder{64, 16, 32, 2, 4};  // V, ctx, d, L, H

// `count` ids below `vocab`, the same for the same seed.
inline std::vector<int32_t> random_ids(int64_t count, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab)));
  return out;
}

// The full forward pass over tokens through the engine: logits [tokens.size(), V].
inline std::vector<float> full_logits(Model& model, const std::vector<int32_t>& tokens) {
  MicroBatch mb;  // no targets: the head leaves the logits in mb.hidden
  mb.tokens = Tensor::from_vector(tokens, {1, static_cast<int64_t>(tokens.size())});
  Engine(model).forward(mb);
  return mb.hidden.to_vector();
}

// got within 1e-4 of the largest |want| of the row, logit by logit.
inline void expect_close(const std::vector<float>& got, const float* want, int64_t count,
                         const std::string& where) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), count) << where;
  float scale = 0.0f;
  for (int64_t v = 0; v < count; ++v) scale = std::max(scale, std::abs(want[v]));
  for (int64_t v = 0; v < count; ++v)
    ASSERT_NEAR(got[v], want[v], 1e-4f * scale) << where << " logit " << v;
}

}  // namespace meshtrain::test

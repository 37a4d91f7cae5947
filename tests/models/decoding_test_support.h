// What the decoder and sampling tests share: a small GPT-2 and reproducible token ids.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/models/gpt2_config.h"
#include "meshtrain/models/rng.h"

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

}  // namespace meshtrain::test

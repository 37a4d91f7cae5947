// Text generation from a single-rank GPT-2 (the whole model on this rank, no strategy). Each new
// token comes from one forward pass over the last min(length, ctx) tokens (no KV cache: the demo
// models are small).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/gpt2.h"

namespace meshtrain {

struct SampleOptions {
  int64_t count = 256;       // tokens to generate
  float temperature = 1.0f;  // 0: greedy (the most likely token, the lowest id on ties)
  uint64_t seed = 0;         // the same seed gives the same text
};

// Returns prompt followed by count generated tokens. The prompt must be non-empty and its ids
// inside the vocabulary.
std::vector<int32_t> generate(GPT2& model, std::vector<int32_t> prompt,
                              const SampleOptions& options);

// Byte-level models (vocab 256): generates options.count bytes after the prompt and returns them
// (without the prompt). An empty prompt starts from "\n".
std::string sample_text(GPT2& model, std::string_view prompt, const SampleOptions& options);

}  // namespace meshtrain

// Text generation through a model's Decoder (the whole model on this rank, no strategy) with its
// key/value cache (GPT-2's: meshtrain/models/gpt2_decoder.h; Llama's: llama_decoder.h): one pass
// over the prompt (its last ctx tokens when it is longer), then one position per generated token.
//
// Each token is drawn from the logits after a window of the sequence's last tokens, encoded from
// position 0. The window starts as the prompt's last min(length, ctx) tokens and grows by one per
// generated token; when it would exceed ctx tokens (the cache is full and the next token has no
// position of its own), it restarts as the last max(1, ctx / 2) tokens: the cache is dropped and
// they are encoded again (one prefill), then decoding goes on one token at a time. So while the
// sequence fits in the context every token sees all of it, and afterwards between ctx / 2 and ctx
// tokens (a prefill of ctx / 2 tokens every ctx / 2 tokens, not a pass over ctx tokens per token).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/models/decoder.h"

namespace meshtrain {

// The temperature of the sample at the end of training, which `meshtrain generate` takes by
// default too: a little sharper than the model's own distribution.
inline constexpr float kDefaultSampleTemperature = 0.8f;

struct SampleOptions {
  int64_t count = 256;       // tokens to generate
  float temperature = 1.0f;  // 0: greedy (the most likely token, the lowest id on ties)
  uint64_t seed = 0;         // the same seed gives the same text
  // Draws only among the top_k most likely tokens (0: all of them), and of those among the fewest
  // most likely whose probabilities, renormalised, sum to top_p or more (nucleus sampling; 1: all),
  // as transformers' top_k and top_p warpers apply them after the temperature.
  int64_t top_k = 0;
  float top_p = 1.0f;
};

// Returns prompt followed by count generated tokens (the decoder's cache is reset first), calling
// on_token (when set) with each generated token as it is drawn. The prompt must be non-empty and
// its ids inside the vocabulary; InvalidArgument for a negative count or top_k, a temperature
// that is negative or not finite, or a top_p outside (0, 1]. With temperature > 0 each token takes
// one draw of Rng(seed).uniform().
std::vector<int32_t> generate(Decoder& decoder, std::vector<int32_t> prompt,
                              const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

// Byte-level models (vocab 256): generates options.count bytes after the prompt and returns them
// (without the prompt), calling on_token (when set) with each as it is drawn. An empty prompt
// starts from "\n".
std::string sample_text(Decoder& decoder, std::string_view prompt, const SampleOptions& options,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace meshtrain

#include "meshtrain/models/sampling.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "meshtrain/core/error.h"
#include "meshtrain/models/rng.h"

namespace meshtrain {

namespace {
int32_t pick(const std::vector<float>& logits, float temperature, Rng& rng) {
  const auto top = std::max_element(logits.begin(), logits.end());
  if (temperature == 0.0f) return static_cast<int32_t>(top - logits.begin());
  std::vector<double> weights(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i)
    total += weights[i] = std::exp((logits[i] - *top) / static_cast<double>(temperature));
  double u = rng.uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i]) return static_cast<int32_t>(i);
    u -= weights[i];
  }
  return static_cast<int32_t>(top - logits.begin());  // rounding left u past the end
}
}  // namespace

std::vector<int32_t> generate(Decoder& decoder, std::vector<int32_t> prompt,
                              const SampleOptions& options) {
  const int64_t vocab = decoder.vocab(), context = decoder.context();
  MT_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  MT_CHECK(options.count >= 0, "generate: count must be >= 0, got ", options.count);
  MT_CHECK(options.temperature >= 0.0f && std::isfinite(options.temperature),
           "generate: temperature must be finite and >= 0 (0 = greedy), got ", options.temperature);
  for (int32_t id : prompt)
    MT_CHECK(id >= 0 && id < vocab, "generate: prompt token ", id,
             " outside the vocabulary [0, ", vocab, ")");
  if (options.count == 0) return prompt;
  // The window's last tokens of the sequence so far, encoded from position 0.
  const auto encode_last = [&](int64_t tokens) {
    decoder.reset();
    return decoder.append(std::span(prompt).last(static_cast<size_t>(tokens)));
  };
  std::vector<float> logits =
      encode_last(std::min<int64_t>(static_cast<int64_t>(prompt.size()), context));
  Rng rng(options.seed);
  for (int64_t n = 0; n < options.count; ++n) {
    const int32_t token = pick(logits, options.temperature, rng);
    prompt.push_back(token);
    if (n + 1 == options.count) break;  // no logits needed after the last token
    if (decoder.length() < context)
      logits = decoder.append(std::span(&token, 1));
    else  // the cache is full: the window slides to the last ctx / 2 tokens
      logits = encode_last(std::max<int64_t>(1, context / 2));
  }
  return prompt;
}

std::string sample_text(Decoder& decoder, std::string_view prompt, const SampleOptions& options) {
  MT_CHECK(decoder.vocab() == 256, "sample_text: needs a byte-level model (vocab 256), got vocab ",
           decoder.vocab());
  std::vector<int32_t> ids;
  for (unsigned char c : prompt.empty() ? std::string_view("\n") : prompt) ids.push_back(c);
  const size_t prompt_length = ids.size();
  const std::vector<int32_t> all = generate(decoder, std::move(ids), options);
  std::string text;
  for (size_t i = prompt_length; i < all.size(); ++i) text.push_back(static_cast<char>(all[i]));
  return text;
}

}  // namespace meshtrain

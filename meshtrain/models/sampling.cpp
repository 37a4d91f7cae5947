#include "meshtrain/models/sampling.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "meshtrain/core/error.h"
#include "meshtrain/models/rng.h"

namespace meshtrain {

namespace {
// Zeroes the weights outside the top_k largest and then outside the nucleus of mass top_p, in the
// order of decreasing weight (ties: the lower id first).
void keep_top(std::vector<double>& weights, int64_t top_k, float top_p) {
  const auto vocab = static_cast<int64_t>(weights.size());
  const int64_t k = top_k == 0 ? vocab : std::min(top_k, vocab);
  if (k == vocab && top_p >= 1.0f) return;
  std::vector<int32_t> order(weights.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return weights[a] > weights[b]; });
  double top_k_mass = 0.0;
  for (int64_t i = 0; i < k; ++i) top_k_mass += weights[order[i]];
  int64_t kept = 0;
  for (double mass = 0.0; kept < k && (kept == 0 || mass < top_p * top_k_mass); ++kept)
    mass += weights[order[kept]];
  for (int64_t i = kept; i < vocab; ++i) weights[order[i]] = 0.0;
}

int32_t pick(const std::vector<float>& logits, const SampleOptions& options, Rng& rng) {
  const auto top = std::max_element(logits.begin(), logits.end());
  if (options.temperature == 0.0f) return static_cast<int32_t>(top - logits.begin());
  std::vector<double> weights(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    weights[i] = std::exp((logits[i] - *top) / static_cast<double>(options.temperature));
  keep_top(weights, options.top_k, options.top_p);
  double total = 0.0;
  for (double w : weights) total += w;
  double u = rng.uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (u < weights[i]) return static_cast<int32_t>(i);
    u -= weights[i];
  }
  return static_cast<int32_t>(top - logits.begin());  // rounding left u past the end
}
}  // namespace

std::vector<int32_t> generate(Decoder& decoder, std::vector<int32_t> prompt,
                              const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const int64_t vocab = decoder.vocab(), context = decoder.context();
  MT_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  MT_CHECK(options.count >= 0, "generate: count must be >= 0, got ", options.count);
  MT_CHECK(options.temperature >= 0.0f && std::isfinite(options.temperature),
           "generate: temperature must be finite and >= 0 (0 = greedy), got ", options.temperature);
  MT_CHECK(options.top_k >= 0, "generate: top_k must be >= 0 (0 = every token), got ",
           options.top_k);
  MT_CHECK(options.top_p > 0.0f && options.top_p <= 1.0f,
           "generate: top_p must be in (0, 1] (1 = every token), got ", options.top_p);
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
    const int32_t token = pick(logits, options, rng);
    prompt.push_back(token);
    if (on_token) on_token(token);
    if (n + 1 == options.count) break;  // no logits needed after the last token
    if (decoder.length() < context)
      logits = decoder.append(std::span(&token, 1));
    else  // the cache is full: the window slides to the last ctx / 2 tokens
      logits = encode_last(std::max<int64_t>(1, context / 2));
  }
  return prompt;
}

std::string sample_text(Decoder& decoder, std::string_view prompt, const SampleOptions& options,
                        const std::function<void(int32_t)>& on_token) {
  MT_CHECK(decoder.vocab() == 256, "sample_text: needs a byte-level model (vocab 256), got vocab ",
           decoder.vocab());
  std::vector<int32_t> ids;
  for (unsigned char c : prompt.empty() ? std::string_view("\n") : prompt) ids.push_back(c);
  const size_t prompt_length = ids.size();
  const std::vector<int32_t> all = generate(decoder, std::move(ids), options, on_token);
  std::string text;
  for (size_t i = prompt_length; i < all.size(); ++i) text.push_back(static_cast<char>(all[i]));
  return text;
}

}  // namespace meshtrain

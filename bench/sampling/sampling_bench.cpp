// Time to generate 256 tokens with the byte-level demo model (V=256, T=64, d=128, L=4, H=4) at
// the trainer's temperature 0.8, two ways in one run:
//   kv_cache:  meshtrain/models/sampling.h generate(): one prefill, then one position per token, the
//              window re-encoding its last ctx / 2 tokens each time the cache fills;
//   recompute: the sampler before the cache, one full forward pass over the last min(length, ctx)
//              tokens per token (written out here as the baseline).
// Run on one core (the kernels use the CPUs the process may use):
//   taskset -c 0 build/bin/sampling_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>

#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/gpt2_decoder.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/models/sampling.h"
#include "meshtrain/parallel/engine.h"

namespace {

using namespace meshtrain;

constexpr int64_t kTokens = 256;
constexpr float kTemperature = 0.8f;

GPT2& demo_model() {
  static GPT2 model(gpt2_preset("demo"));
  return model;
}

std::vector<int32_t> recompute_generate(GPT2& model, std::vector<int32_t> seq, int64_t count,
                                        uint64_t seed) {
  const int64_t vocab = model.config().vocab, ctx = model.config().ctx;
  Rng rng(seed);
  MemoryCategoryScope scope(MemoryCategory::activation);
  for (int64_t n = 0; n < count; ++n) {
    const int64_t window = std::min(static_cast<int64_t>(seq.size()), ctx);
    MicroBatch mb;  // no targets: the head leaves the logits in mb.hidden
    mb.tokens =
        Tensor::from_vector(std::vector<int32_t>(seq.end() - window, seq.end()), {1, window});
    Engine(model).forward(mb);
    const std::vector<float> logits = mb.hidden.view((window - 1) * vocab, {vocab}).to_vector();
    const float top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> weights;
    double total = 0.0;
    for (float l : logits) total += weights.emplace_back(std::exp((l - top) / kTemperature));
    double u = rng.uniform() * total;
    size_t token = 0;
    while (token + 1 < weights.size() && u >= weights[token]) u -= weights[token++];
    seq.push_back(static_cast<int32_t>(token));
  }
  return seq;
}

void count_tokens(benchmark::State& state) {
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(kTokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void BM_kv_cache(benchmark::State& state) {
  GPT2& model = demo_model();
  uint64_t seed = 0;
  for (auto _ : state) {
    Gpt2Decoder decoder(model);  // its cache is part of what sampling costs
    benchmark::DoNotOptimize(
        generate(decoder, {'\n'}, {.count = kTokens, .temperature = kTemperature, .seed = ++seed}));
  }
  count_tokens(state);
}

void BM_recompute(benchmark::State& state) {
  GPT2& model = demo_model();
  uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(recompute_generate(model, {'\n'}, kTokens, ++seed));
  count_tokens(state);
}

BENCHMARK(BM_kv_cache)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_recompute)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

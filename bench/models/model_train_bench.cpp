// Model-level training benchmark, two comparisons in one run on the local backend, each against a
// baseline measured in the same run:
//   ac/none, ac/selective, ac/full   Llama 3 under FSDP (dp_shard=W) with activation checkpointing
//                                    off, on every second block, on every block: peak memory per
//                                    rank and step time (full recomputes about one more forward);
//                                    the final losses are equal, as the recompute is bit-identical.
//   family/gpt2, family/llama        GPT-2 and Llama 3 at the same width, depth, heads and (to
//                                    within one MLP column per block) parameter count: tokens/s and
//                                    achieved model FLOP/s (ModelSpec::training_flops / step time).
// Llama has H/4 key/value heads (grouped-query attention, as Llama 3 8B's 32/8) and its gated
// MLP's width is chosen so that its parameters match GPT-2's.
//
//   model_train_bench [--world=2] [--dim=256] [--layers=4] [--heads=8] [--seq=128] [--batch=16]
//                     [--warmup=2] [--steps=10] [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/train/mode_run.h"
#include "bench/train/token_corpus.h"
#include "meshtrain/models/llama_family.h"

namespace meshtrain::bench {
namespace {

// Ten measured steps: medians over five wobble on a shared two-core machine.
BenchSettings g_settings{.world = 2, .dim = 256, .layers = 4, .heads = 8, .seq = 128, .steps = 10};
std::string g_data_path;
ModeBoard g_ac_board("ac_none");
ModeBoard g_family_board("family_gpt2");

GPT2Config gpt2_of(const BenchSettings& s) {
  return GPT2Config{
      .vocab = s.vocab, .ctx = s.seq, .dim = s.dim, .layers = s.layers, .heads = s.heads};
}

LlamaConfig llama_of(const BenchSettings& s, int64_t ffn_dim) {
  return LlamaConfig{.vocab = s.vocab,
                     .ctx = s.seq,
                     .dim = s.dim,
                     .ffn_dim = ffn_dim,
                     .layers = s.layers,
                     .heads = s.heads,
                     .kv_heads = std::max<int64_t>(1, s.heads / 4),
                     .rope_theta = 500000,
                     .rms_norm_eps = 1e-5,
                     .tie_embeddings = false};
}

// The gated MLP width that brings Llama's parameter count nearest GPT-2's: the count grows by
// 3 d L per unit of width (gate, up and down in every block).
LlamaConfig llama_matching_gpt2(const BenchSettings& s) {
  const double target = static_cast<double>(gpt2_of(s).num_parameters());
  const double at_one = static_cast<double>(llama_of(s, 1).num_parameters());
  const double per_unit = static_cast<double>(llama_of(s, 2).num_parameters()) - at_one;
  const auto width = static_cast<int64_t>(std::llround((target - at_one) / per_unit)) + 1;
  return llama_of(s, std::max<int64_t>(1, width));
}

ModeSpec fsdp_mode(std::string name, const BenchSettings& s, ModelSpecPtr model,
                   ActivationCheckpointing ac = {}) {
  return ModeSpec{.name = std::move(name),
                  .mesh = MeshLayout({{"dp_shard", s.world}}),
                  .strategies = {{"fsdp", {{"mode", "full"}}}},
                  .model = std::move(model),
                  .ac = ac};
}

std::vector<ModeSpec> ac_modes(const BenchSettings& s) {
  const ModelSpecPtr llama = llama_model(llama_matching_gpt2(s));
  return {fsdp_mode("ac_none", s, llama),
          fsdp_mode("ac_selective", s, llama, {.mode = AcMode::selective, .every = 2}),
          fsdp_mode("ac_full", s, llama, {.mode = AcMode::full})};
}

std::vector<ModeSpec> family_modes(const BenchSettings& s) {
  return {fsdp_mode("family_gpt2", s, gpt2_model(gpt2_of(s))),
          fsdp_mode("family_llama", s, llama_model(llama_matching_gpt2(s)))};
}

void print_table(const char* title, const std::vector<ModeSpec>& modes, const ModeBoard& board) {
  const ModeResult* base = board.base();
  std::printf("\n%s\n%-13s %-46s %9s %8s %9s %9s %8s %13s %9s %8s\n", title, "mode", "model",
              "params", "step ms", "vs base", "tok/s", "GFLOP/s", "peak MiB/rank", "vs base",
              "loss");
  for (const ModeSpec& spec : modes) {
    const auto found = board.results.find(spec.name);
    if (found == board.results.end()) continue;  // filtered out
    const ModeResult& r = found->second;
    char time_ratio[16] = "-", memory_ratio[16] = "-";
    if (base) {
      std::snprintf(time_ratio, sizeof time_ratio, "%.3f", r.step_s / base->step_s);
      std::snprintf(
          memory_ratio, sizeof memory_ratio, "%.3f",
          static_cast<double>(r.peak_mem_bytes) / static_cast<double>(base->peak_mem_bytes));
    }
    std::printf("%-13s %-46s %8.2fM %8.1f %9s %9.0f %8.2f %13.2f %9s %8.4f\n", spec.name.c_str(),
                spec.model->describe().c_str(), spec.model->num_parameters() / 1e6, r.step_s * 1e3,
                time_ratio, r.tokens_per_s, r.model_flops_per_s / 1e9, r.peak_mem_bytes / kMiB,
                memory_ratio, r.final_loss);
  }
}

}  // namespace
}  // namespace meshtrain::bench

int main(int argc, char** argv) {
  using namespace meshtrain::bench;
  parse_settings(argc, argv, g_settings);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  const BenchSettings& s = g_settings;
  TokenCorpus corpus(s.batch * (s.seq + 1) * 4);  // a few global batches: steps read new data
  g_data_path = corpus.path();
  const std::vector<ModeSpec> ac = ac_modes(s);
  const std::vector<ModeSpec> families = family_modes(s);
  std::printf(
      "model_train_bench: W=%d FSDP (dp_shard=%d), batch %lld x seq %lld, %d warm-up + %d "
      "measured steps, %d thread(s) per rank\n",
      s.world, s.world, static_cast<long long>(s.batch), static_cast<long long>(s.seq), s.warmup,
      s.steps, make_train_config(s, ac.front(), g_data_path).threads_per_rank());

  register_modes(ac, s, g_data_path, g_ac_board);
  register_modes(families, s, g_data_path, g_family_board);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table("Activation checkpointing (base: ac_none)", ac, g_ac_board);
  print_table("GPT-2 vs Llama 3 at equal parameters (base: family_gpt2)", families, g_family_board);
  return 0;
}

// Training runs for the parallelism tests: the single-rank reference (the model's own forward,
// backward and AdamW, no strategy) and the same run on a mesh through the Trainer, and the check
// that a mesh run reproduces the reference step by step.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "meshtrain/models/llama_config.h"
#include "meshtrain/train/step_metrics.h"
#include "meshtrain/train/train_config.h"
#include "meshtrain/train/trainer.h"

namespace meshtrain::testing {

struct RunResult {
  std::vector<double> losses;
  std::vector<double> grad_norms;                     // global, before clipping
  std::map<std::string, std::vector<float>> params;  // final full values by name
  std::vector<StepMetrics> metrics;                   // mesh runs only
};

// A token file of `count` tokens below `vocab` with some structure to learn, in a temp dir.
std::string synthetic_token_file(int64_t vocab, int64_t count);

// A small config on the given token file; the caller sets the layout.
TrainConfig small_config(const GPT2Config& model, const std::string& data_path);

// GPT-2's FSDP units in closed form: the root (wte, wpe, ln_f), then one per block. Each parameter
// is sharded on dim 0 into ceil(rows / world) rows per rank, padded.
struct UnitSizes {
  int64_t padded;  // elements per rank, padded, over the unit's parameters
  int64_t full;    // elements of the whole unit
};
std::vector<UnitSizes> gpt2_units(const GPT2Config& c, int64_t world);

// The single-rank run of any model family (ModelSpec::build and init_values, the engine with no
// strategy): the reference every layout is checked against.
RunResult run_reference(const TrainConfig& config);
RunResult run_on_mesh(const TrainConfig& config);

// V=67, T=13, d=24, 3d=72, 4d=96, 2 blocks of 4 heads: no parameter's dim 0 divides by 3 or 8,
// few by 2 or 4, and the vocabulary does not divide by tp.
GPT2Config uneven_model();
// small_config(uneven_model()) on a shared synthetic token file; the caller sets the layout.
TrainConfig uneven_config();
// The single-rank run of uneven_config() with clipping at `clip` (0: off), computed once.
const RunResult& uneven_reference(float clip);
// Llama 3 at uneven_model()'s vocabulary and context: d=32, ffn 44, `layers` blocks of 8 query
// heads reading 4 key/value heads (tp 4 splits both), untied or tied.
LlamaConfig uneven_llama(int64_t layers, bool tied);

// Each step's loss and gradient norm within `tolerance` relative, the final parameters within
// `tolerance` absolute.
void expect_same_run(const RunResult& got, const RunResult& want, double tolerance = 1e-5);

// Runs `body` on every rank with a Trainer built from config (for tests that inspect one rank).
void with_trainers(const TrainConfig& config,
                   const std::function<void(Trainer&, MemoryTracker&)>& body);

}  // namespace meshtrain::testing

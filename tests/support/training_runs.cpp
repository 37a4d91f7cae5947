#include "tests/support/training_runs.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/models/token_file.h"

namespace meshtrain::testing {

namespace {
// The token files of this test process, in a folder of its own (ctest runs test processes side by
// side), removed at exit.
struct ProcessTokenDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("meshtrain_training_runs_" + std::to_string(::getpid()));
  ProcessTokenDir() { std::filesystem::create_directories(path); }
  ~ProcessTokenDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};
}  // namespace

std::string synthetic_token_file(int64_t vocab, int64_t count) {
  static const ProcessTokenDir dir;
  const std::string path =
      (dir.path / ("tokens_" + std::to_string(vocab) + "_" + std::to_string(count) + ".bin")).string();
  if (std::filesystem::exists(path)) return path;
  std::vector<Token> tokens(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)  // a slow ramp with a repeating motif: learnable
    tokens[i] = static_cast<Token>((i / 3 + (i % 5) * 7) % vocab);
  write_token_file(path, tokens);
  return path;
}

TrainConfig small_config(const GPT2Config& model, const std::string& data_path) {
  TrainConfig c;
  c.model = gpt2_model(model);
  c.data_path = data_path;
  c.steps = 10;
  c.batch = 48;
  c.seq = std::min<int64_t>(12, model.ctx);
  c.lr.lr = 1e-3f;
  c.weight_decay = 0.1f;
  c.sample_bytes = 0;
  c.quiet = true;
  return c;
}

std::vector<UnitSizes> gpt2_units(const GPT2Config& c, int64_t world) {
  const auto rows = [&](int64_t r, int64_t row_numel) {
    return UnitSizes{(r + world - 1) / world * row_numel, r * row_numel};
  };
  const auto sum = [](std::initializer_list<UnitSizes> parts) {
    UnitSizes total{0, 0};
    for (const UnitSizes& p : parts) {
      total.padded += p.padded;
      total.full += p.full;
    }
    return total;
  };
  const int64_t d = c.dim;
  std::vector<UnitSizes> units = {sum({rows(c.vocab, d), rows(c.ctx, d), rows(d, 1), rows(d, 1)})};
  for (int64_t i = 0; i < c.layers; ++i)
    units.push_back(sum({rows(d, 1), rows(d, 1), rows(d, 3 * d), rows(3 * d, 1), rows(d, d),
                         rows(d, 1), rows(d, 1), rows(d, 1), rows(d, 4 * d), rows(4 * d, 1),
                         rows(4 * d, d), rows(d, 1)}));
  return units;
}

RunResult run_reference(const TrainConfig& config) {
  const std::unique_ptr<Model> built = config.model->build(Device::cpu());
  Model& model = *built;
  materialize(model, *config.model->init_values(config.seed), Device::cpu());
  TokenBatches batches(read_token_file(config.data_path).tokens, config.model->vocab(),
                       config.batch, config.seq);
  AdamWConfig adamw;
  adamw.weight_decay = config.weight_decay;
  AdamW optimizer(adamw);
  RunResult result;
  for (int64_t s = 0; s < config.steps; ++s) {
    const TokenBatch batch = batches.batch(s);
    MicroBatch mb;
    mb.tokens = batch.tokens;
    mb.targets = batch.targets;
    result.losses.push_back(forward(model, mb));
    backward(model, mb);
    const std::vector<OptimizerSlot> slots = parameter_slots(model);
    result.grad_norms.push_back(std::sqrt(grad_sum_squares(slots)));
    if (config.clip > 0.f) clip_grads(slots, result.grad_norms.back(), config.clip);
    optimizer.step(slots, config.lr.at(s));
    zero_grad(model);
  }
  for (Parameter* p : model.parameters()) result.params[p->name()] = p->value().to_vector();
  return result;
}

RunResult run_on_mesh(const TrainConfig& config) {
  RunResult result;
  with_trainers(config, [&](Trainer& trainer, MemoryTracker&) {
    std::vector<StepMetrics> metrics;
    for (int64_t s = 0; s < config.steps; ++s) metrics.push_back(trainer.step());
    std::map<std::string, std::vector<float>> params;
    trainer.gather_parameters([&](const Parameter& p, const Tensor& value) {
      params[p.name()] = value.to_vector();
    });
    if (trainer.rank() == 0) {
      for (const StepMetrics& m : metrics) {
        result.losses.push_back(m.loss);
        result.grad_norms.push_back(m.grad_norm);
      }
      result.metrics = std::move(metrics);
      result.params = std::move(params);
    }
  });
  return result;
}

GPT2Config uneven_model() { return GPT2Config{67, 13, 24, 2, 4}; }

TrainConfig uneven_config() {
  return small_config(uneven_model(), synthetic_token_file(67, 4096));
}

const RunResult& uneven_reference(float clip) {
  static std::map<float, RunResult> cache;
  auto it = cache.find(clip);
  if (it == cache.end()) {
    TrainConfig c = uneven_config();
    c.clip = clip;
    it = cache.emplace(clip, run_reference(c)).first;
  }
  return it->second;
}

LlamaConfig uneven_llama(int64_t layers, bool tied) {
  return LlamaConfig{.vocab = 67,
                     .ctx = 13,
                     .dim = 32,
                     .ffn_dim = 44,
                     .layers = layers,
                     .heads = 8,
                     .kv_heads = 4,
                     .rope_theta = 10000,
                     .rms_norm_eps = 1e-5,
                     .tie_embeddings = tied};
}

void expect_same_run(const RunResult& got, const RunResult& want, double tolerance) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  ASSERT_EQ(got.grad_norms.size(), want.grad_norms.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], tolerance * std::abs(want.losses[s]))
        << "step " << s;
    EXPECT_NEAR(got.grad_norms[s], want.grad_norms[s], tolerance * want.grad_norms[s])
        << "step " << s;
  }
  EXPECT_LT(want.losses.back(), want.losses.front()) << "the run must train for the test to mean much";

  ASSERT_EQ(got.params.size(), want.params.size());
  for (const auto& [name, values] : want.params) {
    const auto it = got.params.find(name);
    ASSERT_NE(it, got.params.end()) << name;
    ASSERT_EQ(it->second.size(), values.size()) << name;
    float worst = 0.f;
    size_t at = 0;
    for (size_t i = 0; i < values.size(); ++i)
      if (std::abs(it->second[i] - values[i]) > worst) {
        worst = std::abs(it->second[i] - values[i]);
        at = i;
      }
    EXPECT_LE(worst, tolerance) << name << " element " << at << ": " << it->second[at] << " vs "
                            << values[at];
  }
}

void with_trainers(const TrainConfig& config,
                   const std::function<void(Trainer&, MemoryTracker&)>& body) {
  spawn_ranks(config.world, [&](RankContext& ctx) {
    Trainer trainer(config, ctx.world, ctx.memory);
    body(trainer, ctx.memory);
  });
}

}  // namespace meshtrain::testing

// Llama 3 by transformers' LlamaForCausalLM conventions: parameter names and [out, in] layouts,
// the published sizes, a forward equal to an independent double-precision reference written from
// the conventions (RMSNorm, rotate-half RoPE, grouped-query heads, SwiGLU, untied or tied head),
// and a backward equal to finite differences of that forward.
#include "meshtrain/models/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "meshtrain/core/error.h"
#include "meshtrain/models/llama_family.h"
#include "meshtrain/models/llama_init.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/parameter_source.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

// H = 4 query heads over KV = 2 key/value heads of 6 dims: query heads 0, 1 read KV head 0.
LlamaConfig small(bool tied) {
  return LlamaConfig{.vocab = 29,
                     .ctx = 16,
                     .dim = 24,
                     .ffn_dim = 40,
                     .layers = 2,
                     .heads = 4,
                     .kv_heads = 2,
                     .rope_theta = 10000,
                     .rms_norm_eps = 1e-5,
                     .tie_embeddings = tied};
}

std::unique_ptr<Llama> built(const LlamaConfig& config, uint64_t seed = 3) {
  auto model = std::make_unique<Llama>(config, Device::cpu());
  materialize(*model, LlamaInitValues(config, seed), Device::cpu());
  // Off the initialisation's symmetry (unit gains) so that every term contributes.
  for (Parameter* p : model->parameters()) {
    std::vector<float> noise(static_cast<size_t>(p->numel()));
    fill_normal(noise.data(), p->numel(), 99, fnv1a64(p->name()), 0, 0.1f);
    float* v = p->value().data<float>();
    for (int64_t i = 0; i < p->numel(); ++i) v[i] += noise[i];
  }
  return model;
}

TokenBatch random_batch(int64_t vocab, int64_t batch, int64_t seq, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> tokens, targets;
  for (int64_t i = 0; i < batch * seq; ++i) {
    tokens.push_back(static_cast<int32_t>(rng.next_u64() % vocab));
    targets.push_back(static_cast<int32_t>(rng.next_u64() % vocab));
  }
  return {Tensor::from_vector(tokens, {batch, seq}), Tensor::from_vector(targets, {batch, seq})};
}

// ---- The reference: transformers' modeling_llama written out in doubles over [T, n] rows. ----
using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

struct Weights {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, Shape> shapes;
  const std::vector<float>& operator[](const std::string& name) const { return values.at(name); }
};

// x @ W^T for W [out, in] (torch.nn.Linear).
Matrix linear(const Matrix& x, const std::vector<float>& w, int64_t out) {
  const size_t in = x[0].size();
  Matrix y(x.size(), std::vector<double>(static_cast<size_t>(out), 0.0));
  for (size_t r = 0; r < x.size(); ++r)
    for (int64_t o = 0; o < out; ++o)
      for (size_t i = 0; i < in; ++i) y[r][o] += x[r][i] * w[o * in + i];
  return y;
}

Matrix rms_norm(const Matrix& x, const std::vector<float>& w, double eps) {
  Matrix y = x;
  for (auto& row : y) {
    double sq = 0;
    for (double v : row) sq += v * v;
    const double scale = 1.0 / std::sqrt(sq / static_cast<double>(row.size()) + eps);
    for (size_t c = 0; c < row.size(); ++c) row[c] *= scale * w[c];
  }
  return y;
}

// rotate_half over each head: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).
void rope(Matrix& x, int64_t heads, int64_t hd, double theta) {
  for (size_t t = 0; t < x.size(); ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double angle = static_cast<double>(t) * std::pow(theta, -2.0 * i / hd);
        double& a = x[t][h * hd + i];
        double& b = x[t][h * hd + i + hd / 2];
        const double x1 = a, x2 = b;
        a = x1 * std::cos(angle) - x2 * std::sin(angle);
        b = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
}

double reference_loss(const LlamaConfig& c, const Weights& w, const TokenBatch& batch) {
  const int64_t hd = c.head_dim(), seq = batch.tokens.dim(1);
  double total = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < batch.tokens.dim(0); ++b) {
    const int32_t* tokens = batch.tokens.data<int32_t>() + b * seq;
    const int32_t* targets = batch.targets.data<int32_t>() + b * seq;
    Matrix x(static_cast<size_t>(seq));
    const auto& embed = w["model.embed_tokens.weight"];
    for (int64_t t = 0; t < seq; ++t)
      x[t].assign(embed.begin() + tokens[t] * c.dim, embed.begin() + (tokens[t] + 1) * c.dim);
    for (int64_t l = 0; l < c.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const Matrix n = rms_norm(x, w[p + "input_layernorm.weight"], c.rms_norm_eps);
      Matrix q = linear(n, w[p + "self_attn.q_proj.weight"], c.heads * hd);
      Matrix k = linear(n, w[p + "self_attn.k_proj.weight"], c.kv_heads * hd);
      const Matrix v = linear(n, w[p + "self_attn.v_proj.weight"], c.kv_heads * hd);
      rope(q, c.heads, hd, c.rope_theta);
      rope(k, c.kv_heads, hd, c.rope_theta);
      Matrix attn(static_cast<size_t>(seq), std::vector<double>(c.heads * hd, 0.0));
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t g = h / (c.heads / c.kv_heads);  // the key/value head it reads
        for (int64_t t = 0; t < seq; ++t) {
          std::vector<double> s(static_cast<size_t>(t + 1));
          double max = -1e300, sum = 0;
          for (int64_t u = 0; u <= t; ++u) {
            s[u] = 0;
            for (int64_t i = 0; i < hd; ++i) s[u] += q[t][h * hd + i] * k[u][g * hd + i];
            s[u] /= std::sqrt(static_cast<double>(hd));
            max = std::max(max, s[u]);
          }
          for (double& e : s) sum += (e = std::exp(e - max));
          for (int64_t u = 0; u <= t; ++u)
            for (int64_t i = 0; i < hd; ++i) attn[t][h * hd + i] += s[u] / sum * v[u][g * hd + i];
        }
      }
      const Matrix o = linear(attn, w[p + "self_attn.o_proj.weight"], c.dim);
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t i = 0; i < c.dim; ++i) x[t][i] += o[t][i];
      const Matrix n2 = rms_norm(x, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps);
      const Matrix gate = linear(n2, w[p + "mlp.gate_proj.weight"], c.ffn_dim);
      Matrix up = linear(n2, w[p + "mlp.up_proj.weight"], c.ffn_dim);
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t f = 0; f < c.ffn_dim; ++f)
          up[t][f] *= gate[t][f] / (1.0 + std::exp(-gate[t][f]));  // silu(gate) * up
      const Matrix down = linear(up, w[p + "mlp.down_proj.weight"], c.dim);
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t i = 0; i < c.dim; ++i) x[t][i] += down[t][i];
    }
    const Matrix logits =
        linear(rms_norm(x, w["model.norm.weight"], c.rms_norm_eps),
               w[c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"], c.vocab);
    for (int64_t t = 0; t < seq; ++t) {
      double max = -1e300, sum = 0;
      for (double z : logits[t]) max = std::max(max, z);
      for (double z : logits[t]) sum += std::exp(z - max);
      total += std::log(sum) + max - logits[t][targets[t]];
      ++count;
    }
  }
  return total / static_cast<double>(count);
}

Weights weights_of(Llama& model) {
  Weights w;
  for (Parameter* p : model.parameters()) {
    w.values[p->name()] = p->value().to_vector();
    w.shapes[p->name()] = p->global_shape();
  }
  return w;
}

double loss_of(Llama& model, const TokenBatch& batch) {
  MicroBatch mb = batch.micro_batch();
  return forward(model, mb);
}

TEST(Llama, NamesAndShapesAreTransformers) {
  const LlamaConfig c = small(false);
  Llama model(c, Device::cpu());
  std::map<std::string, Shape> shapes;
  for (Parameter* p : model.parameters()) shapes[p->name()] = p->global_shape();
  EXPECT_EQ(shapes.size(), 2u + 9u * 2u + 1u);
  EXPECT_EQ(shapes.at("model.embed_tokens.weight"), (Shape{29, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.input_layernorm.weight"), (Shape{24}));
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.q_proj.weight"), (Shape{24, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.k_proj.weight"), (Shape{12, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.v_proj.weight"), (Shape{12, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.o_proj.weight"), (Shape{24, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.post_attention_layernorm.weight"), (Shape{24}));
  EXPECT_EQ(shapes.at("model.layers.1.mlp.gate_proj.weight"), (Shape{40, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.mlp.up_proj.weight"), (Shape{40, 24}));
  EXPECT_EQ(shapes.at("model.layers.1.mlp.down_proj.weight"), (Shape{24, 40}));
  EXPECT_EQ(shapes.at("model.norm.weight"), (Shape{24}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{29, 24}));
  int64_t total = 0;
  for (const auto& [name, shape] : shapes) total += shape_numel(shape);
  EXPECT_EQ(total, c.num_parameters());

  Llama tied(small(true), Device::cpu());
  for (Parameter* p : tied.parameters()) EXPECT_NE(p->name(), "lm_head.weight");
  EXPECT_EQ(tied.parameters().size(), model.parameters().size() - 1);
}

TEST(Llama, PresetsHaveThePublishedSizes) {
  EXPECT_EQ(llama_preset("llama3-8b").num_parameters(), 8030261248);
  EXPECT_EQ(llama_preset("llama3-70b").num_parameters(), 70553706496);
  EXPECT_EQ(llama_preset("llama3.2-1b").num_parameters(), 1235814400);
  EXPECT_EQ(llama_preset("llama3.2-3b").num_parameters(), 3212749824);
  testing::expect_error<InvalidArgument>([&] { llama_preset("llama9"); }, "known: llama3-8b");
}

TEST(Llama, ForwardIsTheReferenceUntiedAndTied) {
  for (const bool tied : {false, true}) {
    const LlamaConfig c = small(tied);
    const auto model = built(c);
    const TokenBatch batch = random_batch(c.vocab, 2, 11, 4);
    const double want = reference_loss(c, weights_of(*model), batch);
    EXPECT_NEAR(loss_of(*model, batch), want, 1e-5 * want) << (tied ? "tied" : "untied");
  }
}

// Tolerance as GPT-2's finite-difference test: |analytic - numeric| <= 1e-2 |numeric| + 1e-4.
TEST(Llama, BackwardMatchesFiniteDifferencesOnEveryParameter) {
  for (const bool tied : {false, true}) {
    const LlamaConfig c = small(tied);
    const auto model = built(c);
    const TokenBatch batch = random_batch(c.vocab, 2, 9, 5);
    zero_grad(*model);
    {
      MicroBatch mb = batch.micro_batch();
      forward(*model, mb);
      backward(*model, mb);
      EXPECT_TRUE(mb.saved.empty());
    }
    const double h = 1e-2;
    for (Parameter* p : model->parameters()) {
      const std::vector<float> grad = p->grad().to_vector();
      float* value = p->value().data<float>();
      const int64_t n = p->numel();
      for (int64_t i : {int64_t{0}, n / 3, n / 2 + 1, n - 1}) {
        const float saved = value[i];
        value[i] = static_cast<float>(saved + h);
        const double plus = loss_of(*model, batch);
        value[i] = static_cast<float>(saved - h);
        const double minus = loss_of(*model, batch);
        value[i] = saved;
        const double numeric = (plus - minus) / (2 * h);
        EXPECT_NEAR(grad[i], numeric, 1e-2 * std::abs(numeric) + 1e-4)
            << p->name() << "[" << i << "]" << (tied ? " tied" : "");
      }
    }
  }
}

TEST(Llama, RefusesBadShapesNamingTheField) {
  LlamaConfig c = small(false);
  c.kv_heads = 3;
  testing::expect_error<InvalidArgument>(
      [&] { llama_model(c); }, "kv_heads must divide heads, got heads = 4 and kv_heads = 3");
  c = small(false);
  c.heads = 8;  // head dim 3: odd
  c.kv_heads = 8;
  testing::expect_error<InvalidArgument>([&] { llama_model(c); },
                                         "must be even for rotary embeddings");
  c = small(false);
  c.rope_theta = 0;
  testing::expect_error<InvalidArgument>([&] { llama_model(c); }, "rope_theta must be > 0");
}

}  // namespace
}  // namespace meshtrain

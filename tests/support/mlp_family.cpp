#include "tests/support/mlp_family.h"

#include <functional>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/mesh/box_runs.h"
#include "meshtrain/parallel/nn/embedding.h"
#include "meshtrain/parallel/nn/lm_head_loss.h"
#include "meshtrain/parallel/nn/mlp.h"

namespace meshtrain::testing {

namespace {

struct MlpConfig {
  int64_t vocab = 0, dim = 0, blocks = 0;
};

class TokenEmbedding : public Layer {
 public:
  TokenEmbedding(Parameter* table, int64_t dim) : table_(table), dim_(dim) {}
  std::string name() const override { return "embed"; }
  std::vector<Parameter*> parameters() override { return table_.parameters(); }
  void forward(MicroBatch& mb, int layer) override {
    mb.hidden = table_.forward(mb.tokens.flatten(), mb.tape(layer));
  }
  void backward(MicroBatch& mb, int layer) override {
    Tape tape = mb.take(layer);
    table_.backward(mb.hidden, tape);
    mb.hidden = Tensor();  // tokens have no gradient
  }
  void add_modules(std::vector<nn::NamedModule>& out) override { out.push_back({"embed", &table_}); }
  Shape hidden_shape(const MicroBatch& mb) override { return {mb.tokens.numel(), dim_}; }

 private:
  nn::Embedding table_;
  int64_t dim_;
};

class ResidualMlp : public Layer {
 public:
  ResidualMlp(std::string name, int64_t dim, Parameter* fc_w, Parameter* fc_b, Parameter* proj_w,
              Parameter* proj_b)
      : name_(std::move(name)), dim_(dim), mlp_(fc_w, fc_b, proj_w, proj_b) {}
  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override {
    std::vector<Parameter*> out = mlp_.c_fc().parameters();
    for (Parameter* p : mlp_.c_proj().parameters()) out.push_back(p);
    return out;
  }
  void forward(MicroBatch& mb, int layer) override {
    const Tensor out = mlp_.forward(mb.hidden, mb.tape(layer));
    ops::add(out, out, mb.hidden);
    mb.hidden = out;
  }
  void backward(MicroBatch& mb, int layer) override {
    Tape tape = mb.take(layer);
    const Tensor d_in = mlp_.backward(mb.hidden, tape);
    ops::add(d_in, d_in, mb.hidden);  // the residual path
    mb.hidden = d_in;
  }
  void add_modules(std::vector<nn::NamedModule>& out) override {
    out.push_back({name_ + ".fc", &mlp_.c_fc()});
    out.push_back({name_ + ".proj", &mlp_.c_proj()});
  }
  Shape hidden_shape(const MicroBatch& mb) override { return {mb.tokens.numel(), dim_}; }

 private:
  std::string name_;
  int64_t dim_;
  nn::Mlp mlp_;
};

class Head : public Layer {
 public:
  Head(Parameter* weight, int64_t dim) : head_(weight), dim_(dim) {}
  std::string name() const override { return "head"; }
  std::vector<Parameter*> parameters() override { return head_.parameters(); }
  void forward(MicroBatch& mb, int layer) override {
    mb.loss_sum += head_.forward(mb.hidden, mb.targets.flatten(), mb.tape(layer));
    mb.hidden = Tensor();
  }
  void backward(MicroBatch& mb, int layer) override {
    Tape tape = mb.take(layer);
    mb.hidden = head_.backward(mb.loss_scale, tape);
  }
  void add_modules(std::vector<nn::NamedModule>& out) override { out.push_back({"head", &head_}); }
  Shape hidden_shape(const MicroBatch& mb) override { return {mb.tokens.numel(), dim_}; }

 private:
  nn::LmHeadLoss head_;
  int64_t dim_;
};

class MlpModel : public Model {
 public:
  MlpModel(const MlpConfig& c, Device device) {
    const auto add = [&](std::string name, Shape shape) {
      params_.push_back(std::make_unique<Parameter>(std::move(name), std::move(shape),
                                                    DType::f32, device));
      return params_.back().get();
    };
    layers_.push_back(std::make_unique<TokenEmbedding>(add("embed.weight", {c.vocab, c.dim}), c.dim));
    for (int64_t b = 0; b < c.blocks; ++b) {
      const std::string n = "blocks." + std::to_string(b);
      Parameter* fc_w = add(n + ".fc.weight", {c.dim, 4 * c.dim});  // [in, out]
      Parameter* fc_b = add(n + ".fc.bias", {4 * c.dim});
      Parameter* proj_w = add(n + ".proj.weight", {4 * c.dim, c.dim});
      Parameter* proj_b = add(n + ".proj.bias", {c.dim});
      layers_.push_back(std::make_unique<ResidualMlp>(n, c.dim, fc_w, fc_b, proj_w, proj_b));
    }
    layers_.push_back(std::make_unique<Head>(add("head.weight", {c.vocab, c.dim}), c.dim));
  }
  std::vector<Parameter*> parameters() override {
    std::vector<Parameter*> out;
    for (auto& p : params_) out.push_back(p.get());
    return out;
  }
  std::vector<Layer*> layers() override {
    std::vector<Layer*> out;
    for (auto& l : layers_) out.push_back(l.get());
    return out;
  }
  std::vector<UnitSpec> default_units() override {
    const int last = static_cast<int>(layers_.size()) - 1;
    std::vector<UnitSpec> units{{"root", {0, last}, /*root=*/true}};
    for (int b = 1; b < last; ++b) units.push_back({"blocks." + std::to_string(b - 1), {b}});
    return units;
  }
  std::vector<nn::TpRule> tensor_parallel_plan() override {
    return {{"embed", nn::TpStyle::vocab},
            {"blocks.*.fc", nn::TpStyle::colwise},
            {"blocks.*.proj", nn::TpStyle::rowwise},
            {"head", nn::TpStyle::vocab}};
  }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

// Uniform in [-0.05, 0.05] from (seed, name, global index), biases 0: any rank fills its pieces.
class HashedUniformInit : public ParameterSource {
 public:
  explicit HashedUniformInit(uint64_t seed) : seed_(seed) {}
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override {
    const uint64_t stream = std::hash<std::string>{}(p.name()) ^ (seed_ * 0x2545f4914f6cdd1dull);
    const bool bias = p.global_shape().size() == 1;
    fill_from_boxes(local, pieces, [&](const TensorSlice& box, const Tensor& out) {
      float* data = out.data<float>();
      for_each_box_run(p.global_shape(), box, [&](int64_t at, int64_t in_box, int64_t count) {
        for (int64_t i = 0; i < count; ++i)
          data[in_box + i] = bias ? 0.f : 0.1f * (unit_interval(stream, at + i) - 0.5f);
      });
    });
  }

 private:
  static float unit_interval(uint64_t stream, int64_t index) {  // splitmix64 of (stream, index)
    uint64_t z = stream + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<float>((z ^ (z >> 31)) >> 40) / static_cast<float>(1 << 24);
  }
  uint64_t seed_;
};

class MlpSpec : public ModelSpec {
 public:
  explicit MlpSpec(const MlpConfig& c) : c_(c) {}
  std::string family() const override { return "mlp_lm"; }
  TextOptions options() const override {
    return {{"vocab", std::to_string(c_.vocab)},
            {"dim", std::to_string(c_.dim)},
            {"blocks", std::to_string(c_.blocks)}};
  }
  std::string describe() const override {
    return detail::concat("residual MLP LM V=", c_.vocab, " d=", c_.dim, " blocks=", c_.blocks);
  }
  int64_t vocab() const override { return c_.vocab; }
  int64_t max_seq() const override { return 0; }  // no positions
  int64_t num_parameters() const override {
    return 2 * c_.vocab * c_.dim + c_.blocks * (8 * c_.dim * c_.dim + 5 * c_.dim);
  }
  double training_flops(double tokens, int64_t /*seq*/) const override {
    return 6.0 * static_cast<double>(num_parameters()) * tokens;
  }
  std::unique_ptr<Model> build(Device device) const override {
    return std::make_unique<MlpModel>(c_, device);
  }
  std::unique_ptr<ParameterSource> init_values(uint64_t seed) const override {
    return std::make_unique<HashedUniformInit>(seed);
  }

 private:
  MlpConfig c_;
};

}  // namespace

ModelFamily mlp_family() {
  const auto size = [](std::string name, std::string help) {
    return OptionSpec{.name = name, .type = OptionSpec::Type::integer, .help = std::move(help),
                      .minimum = 1, .flag = "--" + name};
  };
  return ModelFamily{
      .name = "mlp_lm",
      .help = "a residual-MLP language model (a test family)",
      .options = {size("vocab", "vocabulary size"), size("dim", "model width"),
                  size("blocks", "residual MLP blocks")},
      .presets = {{"mlp-tiny", {{"vocab", "64"}, {"dim", "32"}, {"blocks", "2"}}}},
      .factory = [](const OptionValues& v) -> ModelSpecPtr {
        return std::make_shared<MlpSpec>(
            MlpConfig{.vocab = v.integer("vocab"), .dim = v.integer("dim"),
                      .blocks = v.integer("blocks")});
      }};
}

}  // namespace meshtrain::testing

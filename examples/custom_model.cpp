// Bring your own model: a small residual-MLP language model written against meshtrain's Model and
// Layer interfaces, with its own tensor-parallel plan and its own initialisation, trained under
// FSDP, FSDP x TP and PP x FSDP. Each layout must reproduce the single-rank run step by step.
//
// A model is a list of layers (each with forward and backward over a MicroBatch) naming the
// parameters they use, a default grouping of layers into units (what FSDP gathers at once), and
// the tensor-parallel styles of its building blocks by name. Nothing in the strategies knows
// this model: they transform parameters' layouts and wrap the layers' compute.
#include <meshtrain/core/comm/local/spawn_ranks.h>
#include <meshtrain/core/ops/ops.h>
#include <meshtrain/mesh/box_runs.h>
#include <meshtrain/mesh/device_mesh.h>
#include <meshtrain/models/adamw.h>
#include <meshtrain/models/token_batches.h>
#include <meshtrain/parallel/global_parameters.h>
#include <meshtrain/parallel/grad_norm.h>
#include <meshtrain/parallel/nn/embedding.h>
#include <meshtrain/parallel/nn/lm_head_loss.h>
#include <meshtrain/parallel/nn/mlp.h>
#include <meshtrain/parallel/parallel_plan.h>
#include <meshtrain/plugins/fsdp/fsdp_strategy.h>
#include <meshtrain/plugins/pp/pp_strategy.h>
#include <meshtrain/plugins/tp/tp_strategy.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace meshtrain;

namespace {

constexpr int64_t kVocab = 256, kDim = 64, kBlocks = 2;
constexpr int64_t kBatch = 8, kSeq = 16;
constexpr int kSteps = 10;

// Layers pass token rows [b * T, d] between them.
Shape token_rows(const MicroBatch& mb) { return {mb.tokens.numel(), kDim}; }

class TokenEmbedding : public Layer {
 public:
  explicit TokenEmbedding(Parameter* table) : table_(table) {}
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
  Shape hidden_shape(const MicroBatch& mb) override { return token_rows(mb); }

 private:
  nn::Embedding table_;
};

// out = x + proj(gelu(fc(x)))
class ResidualMlp : public Layer {
 public:
  ResidualMlp(std::string name, Parameter* fc_w, Parameter* fc_b, Parameter* proj_w,
              Parameter* proj_b)
      : name_(std::move(name)), mlp_(fc_w, fc_b, proj_w, proj_b) {}
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
  Shape hidden_shape(const MicroBatch& mb) override { return token_rows(mb); }

 private:
  std::string name_;
  nn::Mlp mlp_;
};

// An untied LM head and the mean cross-entropy (the runner scales by 1 / global tokens).
class Head : public Layer {
 public:
  explicit Head(Parameter* weight) : head_(weight) {}
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
  Shape hidden_shape(const MicroBatch& mb) override { return token_rows(mb); }

 private:
  nn::LmHeadLoss head_;
};

class MlpLanguageModel : public Model {
 public:
  // Parameters are created without tensors: a plan fills each rank's pieces from a source.
  MlpLanguageModel() {
    layers_.push_back(std::make_unique<TokenEmbedding>(add("embed.weight", {kVocab, kDim})));
    for (int64_t b = 0; b < kBlocks; ++b) {
      const std::string n = "blocks." + std::to_string(b);
      // Linear weights are [in, out] (GPT-2's Conv1D layout).
      Parameter* fc_w = add(n + ".fc.weight", {kDim, 4 * kDim});
      Parameter* fc_b = add(n + ".fc.bias", {4 * kDim});
      Parameter* proj_w = add(n + ".proj.weight", {4 * kDim, kDim});
      Parameter* proj_b = add(n + ".proj.bias", {kDim});
      layers_.push_back(std::make_unique<ResidualMlp>(n, fc_w, fc_b, proj_w, proj_b));
    }
    layers_.push_back(std::make_unique<Head>(add("head.weight", {kVocab, kDim})));
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
  // The root unit holds the embedding and the head; then one unit per block.
  std::vector<UnitSpec> default_units() override {
    const int last = static_cast<int>(layers_.size()) - 1;
    std::vector<UnitSpec> units{{"root", {0, last}, /*root=*/true}};
    for (int b = 1; b < last; ++b) units.push_back({"blocks." + std::to_string(b - 1), {b}});
    return units;
  }
  // Megatron's split of an MLP: fc column-parallel, proj row-parallel (one all-reduce each way);
  // the vocabulary split over tp in the embedding and in the head's cross-entropy.
  std::vector<nn::TpRule> tensor_parallel_plan() override {
    return {{"embed", nn::TpStyle::vocab},
            {"blocks.*.fc", nn::TpStyle::colwise},
            {"blocks.*.proj", nn::TpStyle::rowwise},
            {"head", nn::TpStyle::vocab}};
  }

 private:
  Parameter* add(std::string name, Shape shape) {
    params_.push_back(std::make_unique<Parameter>(std::move(name), std::move(shape)));
    return params_.back().get();
  }
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

// Initial values that depend only on the parameter's name and the element's global index, so a
// rank computes exactly its own pieces, whatever the layout: uniform in [-0.05, 0.05], biases 0.
class HashedUniformInit : public ParameterSource {
 public:
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override {
    const uint64_t stream = std::hash<std::string>{}(p.name());
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
};

std::vector<Token> training_tokens() {
  const std::string text = "the mesh is pipeline by data by tensor; each strategy owns an axis. ";
  std::vector<Token> tokens;
  for (int copy = 0; copy < 16; ++copy)
    for (const unsigned char c : text) tokens.push_back(c);
  return tokens;
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> parameters;
};

Run train(int world, const std::vector<MeshAxis>& axes) {
  Run run;
  spawn_ranks(world, [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, axes);
    MlpLanguageModel model;
    const HashedUniformInit init;
    ParallelPlan plan;
    if (mesh.axis_size("pp") > 1) plan.add(std::make_unique<PpStrategy>(), {"pp"});
    if (mesh.axis_size("tp") > 1) plan.add(std::make_unique<TpStrategy>(), {"tp"});
    if (mesh.axis_size("dp_shard") > 1)
      plan.add(std::make_unique<FsdpStrategy>(FsdpOptions{}), {"dp_shard"});
    ParallelModel pm = plan.apply(mesh, model, &init);

    TokenBatches batches(training_tokens(), kVocab, kBatch, kSeq, mesh.axis_size("dp"),
                         mesh.axis_rank("dp"));
    const int micro_batches = mesh.axis_size("pp") > 1 ? 2 : 1;  // a pipeline needs several
    const int64_t rows = batches.local_batch() / micro_batches;
    AdamW optimizer;
    for (int step = 0; step < kSteps; ++step) {
      const TokenBatch batch = batches.batch(step);
      std::vector<MicroBatch> mbs(micro_batches);
      for (int k = 0; k < micro_batches; ++k) {
        mbs[k].tokens = batch.tokens.rows(k * rows, rows);
        mbs[k].targets = batch.targets.rows(k * rows, rows);
      }
      const double loss = pm.runner->run(mbs, double(kBatch * kSeq));
      const std::vector<OptimizerSlot> slots = pm.state->optimizer_slots();
      clip_grads(slots, global_grad_norm(slots, mesh), 1.0f);
      optimizer.step(slots, 3e-3f);
      pm.state->zero_grad();
      if (ctx.rank == 0) run.losses.push_back(loss);
    }
    gather_parameters(*pm.state, mesh, model, [&](const Parameter& p, const Tensor& value) {
      run.parameters[p.name()] = value.to_vector();
    });
  });
  return run;
}

// The largest difference from the reference: relative for losses, absolute for parameters.
std::pair<double, double> difference(const Run& run, const Run& reference) {
  double loss = 0.0, parameter = 0.0;
  for (size_t s = 0; s < reference.losses.size(); ++s)
    loss = std::max(loss, std::abs(run.losses[s] - reference.losses[s]) / reference.losses[s]);
  for (const auto& [name, expected] : reference.parameters)
    for (size_t i = 0; i < expected.size(); ++i)
      parameter = std::max(parameter, double(std::abs(run.parameters.at(name)[i] - expected[i])));
  return {loss, parameter};
}

}  // namespace

int main() {
  const Run reference = train(1, {{"pp", 1}, {"dp_shard", 1}, {"tp", 1}});
  std::printf("one rank: loss %.4f -> %.4f over %d steps\n", reference.losses.front(),
              reference.losses.back(), kSteps);
  struct Layout {
    const char* name;
    std::vector<MeshAxis> axes;
  };
  const std::vector<Layout> layouts = {
      {"FSDP        dp_shard=4", {{"pp", 1}, {"dp_shard", 4}, {"tp", 1}}},
      {"FSDP x TP   dp_shard=2,tp=2", {{"pp", 1}, {"dp_shard", 2}, {"tp", 2}}},
      {"PP x FSDP   pp=2,dp_shard=2", {{"pp", 2}, {"dp_shard", 2}, {"tp", 1}}},
  };
  bool all_match = true;
  for (const Layout& layout : layouts) {
    const auto [loss, parameter] = difference(train(4, layout.axes), reference);
    const bool match = loss < 1e-5 && parameter < 1e-5;
    all_match = all_match && match;
    std::printf("%-30s loss diff %.1e, parameter diff %.1e  %s\n", layout.name, loss, parameter,
                match ? "matches" : "MISMATCH");
  }
  return all_match ? 0 : 1;
}

// A toy Model for the framework tests: layers that record what ran into a shared trace, each with
// a name and a list of parameters (a tied parameter is simply listed by two layers).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/parameter_source.h"
#include "tests/support/error_message.h"

namespace meshtrain::testing {

using Trace = std::vector<std::string>;

class ToyLayer : public Layer {
 public:
  ToyLayer(std::string name, std::vector<Parameter*> params, Trace* trace)
      : name_(std::move(name)), params_(std::move(params)), trace_(trace) {}

  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override { return params_; }
  void forward(MicroBatch& mb, int layer_index) override {
    if (trace_) trace_->push_back("forward " + name_ + "@" + std::to_string(layer_index));
    mb.tape(layer_index);
  }
  void backward(MicroBatch& mb, int layer_index) override {
    if (trace_) trace_->push_back("backward " + name_ + "@" + std::to_string(layer_index));
    mb.take(layer_index);  // throws unless forward ran for this layer index
  }

 private:
  std::string name_;
  std::vector<Parameter*> params_;
  Trace* trace_;
};

// Toy parameters have no tensors until a plan places them; they start at zero.
class ZeroValues : public ParameterSource {
 public:
  void read(const Parameter&, const std::vector<LocalPiece>&, const Tensor& local) const override {
    local.zero_();
  }
};

// Layer i is named "s<i>"; layer_params[i] lists indices into the owned parameters "p<j>".
class ToyModel : public Model {
 public:
  ToyModel(int num_params, const std::vector<std::vector<int>>& layer_params,
           std::vector<UnitSpec> units = {}, Trace* trace = nullptr)
      : units_(std::move(units)) {
    for (int j = 0; j < num_params; ++j)
      params_.push_back(std::make_unique<Parameter>("p" + std::to_string(j), Shape{2, 3}));
    for (size_t i = 0; i < layer_params.size(); ++i) {
      std::vector<Parameter*> used;
      for (int j : layer_params[i]) used.push_back(params_[j].get());
      layers_.push_back(std::make_unique<ToyLayer>("s" + std::to_string(i), used, trace));
    }
  }

  std::vector<Parameter*> parameters() override {
    std::vector<Parameter*> out;
    for (auto& p : params_) out.push_back(p.get());
    return out;
  }
  std::vector<Layer*> layers() override {
    std::vector<Layer*> out;
    for (auto& s : layers_) out.push_back(s.get());
    return out;
  }
  std::vector<UnitSpec> default_units() override { return units_; }
  Parameter& param(int j) { return *params_[j]; }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<ToyLayer>> layers_;
  std::vector<UnitSpec> units_;
};

// A GPT-2 shaped toy with `blocks` blocks: layer 0 "embedding" and layer blocks+1 "head" share the
// tied parameter p0 (and form the root unit), block i (layer i) uses its own parameter p<i>.
inline ToyModel gpt2_like(int blocks, Trace* trace = nullptr) {
  std::vector<std::vector<int>> layer_params;
  layer_params.push_back({0});
  for (int b = 1; b <= blocks; ++b) layer_params.push_back({b});
  layer_params.push_back({blocks + 1, 0});  // a final-norm style parameter, then the tied one
  std::vector<UnitSpec> units{{"root", {0, blocks + 1}, /*root=*/true}};
  for (int b = 1; b <= blocks; ++b) units.push_back({"block" + std::to_string(b - 1), {b}});
  return ToyModel(blocks + 2, layer_params, units, trace);
}

}  // namespace meshtrain::testing

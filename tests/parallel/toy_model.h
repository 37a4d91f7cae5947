// A toy Model for the framework tests: stages that record what ran into a shared trace, each with
// a name and a list of parameters (a tied parameter is simply listed by two stages).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "parallel/model.h"
#include "tests/support/error_message.h"

namespace meshtrain::testing {

using Trace = std::vector<std::string>;

class ToyStage : public Stage {
 public:
  ToyStage(std::string name, std::vector<Parameter*> params, Trace* trace)
      : name_(std::move(name)), params_(std::move(params)), trace_(trace) {}

  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override { return params_; }
  void forward(MicroBatch& mb, int stage_index) override {
    if (trace_) trace_->push_back("forward " + name_ + "@" + std::to_string(stage_index));
    mb.save(stage_index, {});
  }
  void backward(MicroBatch& mb, int stage_index) override {
    if (trace_) trace_->push_back("backward " + name_ + "@" + std::to_string(stage_index));
    mb.take(stage_index);  // throws unless forward ran for this stage index
  }

 private:
  std::string name_;
  std::vector<Parameter*> params_;
  Trace* trace_;
};

// Stage i is named "s<i>"; stage_params[i] lists indices into the owned parameters "p<j>".
class ToyModel : public Model {
 public:
  ToyModel(int num_params, const std::vector<std::vector<int>>& stage_params,
           std::vector<UnitSpec> units = {}, Trace* trace = nullptr)
      : units_(std::move(units)) {
    for (int j = 0; j < num_params; ++j)
      params_.push_back(std::make_unique<Parameter>("p" + std::to_string(j), Shape{2, 3}));
    for (size_t i = 0; i < stage_params.size(); ++i) {
      std::vector<Parameter*> used;
      for (int j : stage_params[i]) used.push_back(params_[j].get());
      stages_.push_back(std::make_unique<ToyStage>("s" + std::to_string(i), used, trace));
    }
  }

  std::vector<Parameter*> parameters() override {
    std::vector<Parameter*> out;
    for (auto& p : params_) out.push_back(p.get());
    return out;
  }
  std::vector<Stage*> stages() override {
    std::vector<Stage*> out;
    for (auto& s : stages_) out.push_back(s.get());
    return out;
  }
  std::vector<UnitSpec> default_units() override { return units_; }
  Parameter& param(int j) { return *params_[j]; }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::vector<std::unique_ptr<ToyStage>> stages_;
  std::vector<UnitSpec> units_;
};

// A GPT-2 shaped toy with `blocks` blocks: stage 0 "embedding" and stage blocks+1 "head" share the
// tied parameter p0 (and form the root unit), block i (stage i) uses its own parameter p<i>.
inline ToyModel gpt2_like(int blocks, Trace* trace = nullptr) {
  std::vector<std::vector<int>> stage_params;
  stage_params.push_back({0});
  for (int b = 1; b <= blocks; ++b) stage_params.push_back({b});
  stage_params.push_back({blocks + 1, 0});  // a final-norm style parameter, then the tied one
  std::vector<UnitSpec> units{{"root", {0, blocks + 1}}};
  for (int b = 1; b <= blocks; ++b) units.push_back({"block" + std::to_string(b - 1), {b}});
  return ToyModel(blocks + 2, stage_params, units, trace);
}

}  // namespace meshtrain::testing

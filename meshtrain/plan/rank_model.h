// RankModel: the model one rank computes with, built as a run builds it but without tensors and
// without a backend: the family's model (parameters named and shaped), cut to the pipeline stages
// of pp rank `pp_rank` (partition_layers and StageModel, as PpStrategy does) and narrowed by the
// model's tensor-parallel plan for tp rank `tp_rank` (each module's own parallelize, as
// TpStrategy does, over a shape-only tp group). Every parameter's shape() is then the piece that
// rank holds before FSDP shards it, and unit_specs() the units FSDP would make of them.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "meshtrain/models/model_spec.h"
#include "meshtrain/plan/plan_layout.h"
#include "meshtrain/plan/shape_communicator.h"
#include "meshtrain/plugins/pp/stage_model.h"

namespace meshtrain {

class RankModel {
 public:
  RankModel(const ModelSpec& spec, const PlanLayout& layout, int pp_rank, int tp_rank);

  // The layers and parameters of this rank: its stages, or the whole model without pp.
  Model& model() { return stage_ ? static_cast<Model&>(*stage_) : *full_; }
  // The pipeline stages this rank runs (r, r + pp, ... under virtual stages); {0} without pp.
  const std::vector<int>& stages() const { return stages_; }
  // FSDP's units of this rank's layers: the layout's unit policy's, or the model's default
  // (of the stages, under pp).
  std::vector<UnitSpec> unit_specs();

 private:
  std::function<std::vector<UnitSpec>(Model&)> unit_policy_;
  // Declared before the model, destroyed after it: its parallelized modules point to it.
  std::unique_ptr<ShapeCommunicator> tp_group_;
  std::unique_ptr<Model> full_;
  std::unique_ptr<StageModel> stage_;
  std::vector<int> stages_;
};

}  // namespace meshtrain

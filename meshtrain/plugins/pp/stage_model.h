// Pipeline stages of a model: which layers each stage runs, and the model one pipeline rank sees.
//
// A model's layers split into S = ranks x virtual stages contiguous stages, balanced by layer
// count: with N layers stage s runs layers [s N / S, (s + 1) N / S), so the first stage starts
// with the embedding and the last ends with the head (GPT-2), or as `layers_per_stage` says. Rank
// r runs stages r, r + ranks, ... (its chunks, interleaved).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "meshtrain/parallel/engine.h"
#include "meshtrain/parallel/model.h"

namespace meshtrain {

// Global layer spans of the S stages. `layers_per_stage` (empty: balanced) must hold S positive
// counts summing to num_layers.
std::vector<LayerSpan> partition_layers(int num_layers, int stages,
                                        const std::vector<int>& layers_per_stage = {});
// "2,3,3" -> {2, 3, 3}; InvalidArgument naming the text otherwise.
std::vector<int> parse_layer_counts(std::string_view text);

// The layers of this rank's stages, in stage order, as a Model: its parameters are the ones those
// layers use, its units the model's default units restricted to them (empty ones dropped).
class StageModel : public Model {
 public:
  StageModel(Model& full, const std::vector<LayerSpan>& stage_spans);

  std::vector<Parameter*> parameters() override { return params_; }
  std::vector<Layer*> layers() override { return layers_; }
  std::vector<UnitSpec> default_units() override { return units_; }
  std::vector<nn::TpRule> tensor_parallel_plan() override { return full_.tensor_parallel_plan(); }

  // The span of each stage in this model's (local) layer indices, in stage order.
  const std::vector<LayerSpan>& local_spans() const { return local_spans_; }

 private:
  Model& full_;
  std::vector<Layer*> layers_;
  std::vector<Parameter*> params_;
  std::vector<UnitSpec> units_;
  std::vector<LayerSpan> local_spans_;
};

}  // namespace meshtrain

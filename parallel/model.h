// The model interface that strategies transform and the engine runs.
//
// A model is a list of layers (compute, in forward order), each naming the parameters it uses.
// Units are groups of layers whose parameters a strategy treats as one (one FSDP unit each); the
// model proposes a default grouping, and a unit need not be contiguous: GPT-2's root unit owns the
// embedding (first layer) and the tied head (last layer). See parallel/units.h.
//
// Words: a layer is a piece of the model with forward and backward; a stage is a pipeline stage
// (a run of layers on one pp rank); a unit is what FSDP gathers at once.
#pragma once

#include <string>
#include <vector>

#include "parallel/micro_batch.h"
#include "parallel/nn/module.h"
#include "parallel/parameter.h"

namespace meshtrain {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  // The parameters this layer reads (a tied parameter appears in every layer that uses it).
  virtual std::vector<Parameter*> parameters() = 0;
  // Reads mb.hidden (or mb.tokens), writes mb.hidden (or adds to mb.loss_sum), saves what
  // backward needs on mb.tape(layer_index).
  virtual void forward(MicroBatch& mb, int layer_index) = 0;
  // Reads the gradient of its output from mb.hidden and replaces it with the gradient of its
  // input; accumulates (+=) into its parameters' gradients (skipping frozen ones).
  virtual void backward(MicroBatch& mb, int layer_index) = 0;
};

// A proposed unit: a name and the indices of its layers.
struct UnitSpec {
  std::string name;
  std::vector<int> layers;
};

class Model {
 public:
  virtual ~Model() = default;
  // Every parameter once, in a fixed order that is the same on every rank.
  virtual std::vector<Parameter*> parameters() = 0;
  virtual std::vector<Layer*> layers() = 0;
  // The default grouping (GPT-2: the root, then one unit per block).
  virtual std::vector<UnitSpec> default_units() = 0;
  // The building blocks by name and the model's tensor-parallel plan over them (data, as
  // torchtitan keeps a parallelize plan per model). Empty for a model without TP support.
  virtual std::vector<nn::NamedModule> modules() { return {}; }
  virtual std::vector<nn::TpRule> tensor_parallel_plan() { return {}; }
};

}  // namespace meshtrain

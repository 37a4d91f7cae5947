// The model interface that strategies transform and the engine runs.
//
// A model is a list of layers (compute, in forward order), each naming the parameters it uses.
// Units are groups of layers whose parameters a strategy treats as one (one FSDP unit each); the
// model proposes a default grouping, and a unit need not be contiguous: GPT-2's root unit owns the
// embedding (first layer) and the tied head (last layer). See meshtrain/parallel/units.h.
//
// Words: a layer is a piece of the model with forward and backward; a stage is a pipeline stage
// (a run of layers on one pp rank); a unit is what FSDP gathers at once.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"
#include "meshtrain/parallel/parameter.h"

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
  // The same in two parts, for zero-bubble schedules (Qi et al. 2024): backward_input leaves the
  // input gradient in mb.hidden and defers what the big weight gradients need; backward_weight
  // computes them later. A layer that does not split does everything in backward_input.
  virtual void backward_input(MicroBatch& mb, int layer_index) { backward(mb, layer_index); }
  virtual void backward_weight(MicroBatch& /*mb*/, int /*layer_index*/) {}
  // Appends the layer's named building blocks (what a tensor-parallel plan names).
  virtual void add_modules(std::vector<nn::NamedModule>& /*out*/) {}
  // The shape of the hidden state this layer reads or writes between layers for `mb` on this rank
  // ([rows, d], rows being this rank's share under sequence parallelism): what a pipeline stage
  // receives. Layers that never sit at a pipeline boundary need not say.
  virtual Shape hidden_shape(const MicroBatch& mb);
};

// A proposed unit: a name and the indices of its layers. The root holds the model's outer
// parameters (GPT-2's embeddings, final LayerNorm and tied head), which FSDP keeps unsharded from
// forward to backward, as FSDP2 does with the module fully_shard wraps last.
struct UnitSpec {
  std::string name;
  std::vector<int> layers;
  bool root = false;
};

class Model {
 public:
  virtual ~Model() = default;
  // Every parameter once, in a fixed order that is the same on every rank.
  virtual std::vector<Parameter*> parameters() = 0;
  virtual std::vector<Layer*> layers() = 0;
  // The default grouping (GPT-2: the root, then one unit per block).
  virtual std::vector<UnitSpec> default_units() = 0;
  // The building blocks of the layers by name, and the model's tensor-parallel plan over them
  // (data, as torchtitan keeps a parallelize plan per model; empty without TP support).
  std::vector<nn::NamedModule> modules();
  virtual std::vector<nn::TpRule> tensor_parallel_plan() { return {}; }
  // The shape of the activation between layers for `mb` on this rank: its first layer's
  // hidden_shape (under pipeline parallelism, the first layer of this rank's stages).
  Shape activation_shape(const MicroBatch& mb);
};

}  // namespace meshtrain

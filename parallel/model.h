// The model interface that strategies transform and the engine runs.
//
// A model is a list of stages (compute, in forward order), each naming the parameters it uses.
// Units are groups of stages whose parameters a strategy treats as one (one FSDP unit each); the
// model proposes a default grouping, and a unit need not be contiguous: GPT-2's root unit owns the
// embedding (first stage) and the tied head (last stage). See parallel/units.h.
#pragma once

#include <string>
#include <vector>

#include "parallel/micro_batch.h"
#include "parallel/parameter.h"

namespace meshtrain {

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string name() const = 0;
  // The parameters this stage reads (a tied parameter appears in every stage that uses it).
  virtual std::vector<Parameter*> parameters() = 0;
  // Reads mb.hidden (or mb.tokens), writes mb.hidden (or adds to mb.loss_sum), saves what
  // backward needs under its stage index.
  virtual void forward(MicroBatch& mb, int stage_index) = 0;
  // Reads the gradient of its output from mb.hidden and replaces it with the gradient of its
  // input; accumulates (+=) into its parameters' gradients (skipping frozen ones).
  virtual void backward(MicroBatch& mb, int stage_index) = 0;
};

// A proposed unit: a name and the indices of its stages.
struct UnitSpec {
  std::string name;
  std::vector<int> stages;
};

class Model {
 public:
  virtual ~Model() = default;
  // Every parameter once, in a fixed order that is the same on every rank.
  virtual std::vector<Parameter*> parameters() = 0;
  virtual std::vector<Stage*> stages() = 0;
  // The default grouping (GPT-2: the root, then one unit per block).
  virtual std::vector<UnitSpec> default_units() = 0;
};

}  // namespace meshtrain

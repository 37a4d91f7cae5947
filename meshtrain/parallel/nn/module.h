// nn: the building blocks models are made of (Linear, LayerNorm, Attention, MLP, embeddings, the
// tied LM head with its cross-entropy), each with an explicit forward and backward as in llm.c and
// Megatron-LM. Forward pushes what backward needs on a Tape; backward pops it in reverse.
//
// Tensor parallelism does not replace modules: it applies a style to a module by name (the model's
// plan, see meshtrain/parallel/model.h), and the module shards its own parameters over the tp axis and
// switches to its parallel form (column- or row-parallel, vocab-parallel, local heads, sequence
// parallel), as torchtitan's parallelize_module applies ParallelStyles. Activations are token
// matrices [rows, features]; under sequence parallelism the rows between blocks are split over tp.
#pragma once

#include <string>
#include <vector>

#include "meshtrain/mesh/mesh_layout.h"
#include "meshtrain/parallel/nn/tensor_parallel.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain::nn {

enum class TpStyle {
  colwise,   // Linear: output features split (the weight's out dim, bias Shard(0)); input replicated
  rowwise,   // Linear: input features split (the weight's in dim); output reduced over tp, bias
             // replicated
  vocab,     // Embedding and LM head: vocabulary rows split (Shard(0)); partial results reduced
  heads,     // Attention: each tp rank computes heads / tp heads
  sequence,  // LayerNorm and position embedding: replicated weights; under sequence parallelism
             // they see only their rank's rows, so their gradients are summed over tp
};
std::string_view tp_style_name(TpStyle style);

// One entry of a model's tensor-parallel plan: the modules whose name matches `pattern` ('*'
// matches one dot-free name part, as in "h.*.attn.c_attn") take `style`.
struct TpRule {
  std::string pattern;
  TpStyle style;
};
bool matches_pattern(std::string_view pattern, std::string_view name);

// What a module needs to parallelize itself: the mesh (to compute which global slice this rank
// holds) and the tp group to compute over.
struct TpSetup {
  MeshLayout mesh;
  int rank = 0;  // in the mesh
  TensorParallel tp;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual std::vector<Parameter*> parameters() = 0;
  // InvalidArgument when the module cannot take `style` over `tp` ranks: a style it has no
  // parallel form for, or sizes that do not split (heads, vocabulary rows). Needs no tensors, so
  // a plan is checked before anything is placed; parallelize checks the same, so each rule lives
  // here once.
  virtual void check_parallel(TpStyle style, int tp) const;
  // Shards this module's parameters over tp and switches compute to the parallel form, after
  // check_parallel.
  virtual void parallelize(TpStyle style, const TpSetup& setup);
};

struct NamedModule {
  std::string name;
  Module* module;
};

// Narrows `param` to this rank's piece of the layout Shard-on-tp(`placement`) (the plan fills the
// piece later). A parameter already laid out so (a tied weight reached a second time) is left as
// it is; any other prior layout is an error.
void shard_on_tp(Parameter& param, const Placement& placement, const TpSetup& setup);

}  // namespace meshtrain::nn

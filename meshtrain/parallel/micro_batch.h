// MicroBatch: what flows through a model's layers for one micro-batch on one rank. Forward fills
// `hidden` layer by layer; backward carries the gradient of `hidden` back. Each layer keeps what its
// backward needs on a Tape, keyed by the layer's index, so several micro-batches can be in flight
// (pipeline schedules) without layers holding per-micro-batch state themselves.
#pragma once

#include <map>
#include <vector>

#include "meshtrain/core/tensor.h"

namespace meshtrain {

// The tensors a forward saves for its backward, last in first out: a layer's building blocks push
// in forward order and pop in reverse, in backward.
class Tape {
 public:
  void push(Tensor t) { tensors_.push_back(std::move(t)); }
  Tensor pop();  // throws when empty: backward asked for more than forward saved
  bool empty() const { return tensors_.empty(); }

 private:
  std::vector<Tensor> tensors_;
};

struct MicroBatch {
  int index = 0;   // within the optimizer step
  Tensor tokens;   // i32 [b, T]: this rank's sequences
  Tensor targets;  // i32 [b, T]: tokens shifted by one; undefined for inference (the head then
                   // leaves the logits in `hidden`)
  Tensor hidden;   // forward: the activation between layers; backward: its gradient
  double loss_sum = 0.0;   // sum of this rank's per-token losses
  float loss_scale = 0.f;  // d(loss)/d(token loss) = 1 / tokens in the global batch
  std::map<int, Tape> saved;
  // What a split backward's input part keeps for its weight part (zero-bubble schedules).
  std::map<int, Tape> deferred;
  // The input of each layer that activation checkpointing recomputes: all it keeps from forward.
  std::map<int, Tensor> recompute_inputs;

  // Where layer `index` saves for backward (created empty on first use).
  Tape& tape(int layer) { return saved[layer]; }
  // Hands the layer's tape to backward and forgets it, freeing activations as backward goes.
  Tape take(int layer);
  // Hands over what backward_input deferred for the layer's backward_weight.
  Tape take_deferred(int layer);
};

}  // namespace meshtrain

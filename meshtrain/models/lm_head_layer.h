// The last layer of both built-in families: the final norm (GPT-2's LayerNorm ln_f, Llama's
// RMSNorm model.norm), the LM head (tied to the token embedding or its own weight) and the
// cross-entropy of the targets. `Norm` is an nn building block with forward(x, tape),
// backward(d_y, tape), tp() and parameters().
#pragma once

#include <string>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/models/layer_checks.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/nn/lm_head_loss.h"

namespace meshtrain {

template <typename Norm>
class LmHeadLayer : public Layer {
 public:
  // `norm_name`: the module name the tensor-parallel plan gives the norm ("ln_f", "model.norm");
  // `lm_head`: the [V, d] weight the logits read.
  LmHeadLayer(Norm norm, std::string norm_name, Parameter* lm_head)
      : norm_(std::move(norm)), norm_name_(std::move(norm_name)), lm_head_(lm_head) {}
  std::string name() const override { return "head"; }
  std::vector<Parameter*> parameters() override {
    return concat({norm_.parameters(), lm_head_.parameters()});
  }

  // With mb.targets: adds the token losses to mb.loss_sum and leaves mb.hidden undefined.
  // Without (inference): leaves the logits [rows, V] in mb.hidden.
  void forward(MicroBatch& mb, int layer_index) override {
    MemoryCategoryScope scope(MemoryCategory::activation);
    expect_hidden(mb.hidden, name(), "the input");
    Tape& tape = mb.tape(layer_index);
    const Tensor normed = norm_.forward(mb.hidden, tape);
    if (!mb.targets.defined()) {
      mb.hidden = lm_head_.logits(normed);
      mb.saved.erase(layer_index);  // inference: nothing runs backward
      return;
    }
    mb.loss_sum += lm_head_.forward(normed, mb.targets.flatten(), tape);
    mb.hidden = Tensor();
  }
  void backward(MicroBatch& mb, int layer_index) override {
    run_backward(mb, layer_index, nullptr);
  }
  // Defers the head's weight gradient.
  void backward_input(MicroBatch& mb, int layer_index) override {
    run_backward(mb, layer_index, &mb.deferred[layer_index]);
  }
  void backward_weight(MicroBatch& mb, int layer_index) override {
    MemoryCategoryScope scope(MemoryCategory::activation);
    Tape deferred = mb.take_deferred(layer_index);
    lm_head_.backward_weight(deferred);
  }
  void add_modules(std::vector<nn::NamedModule>& out) override {
    out.push_back({norm_name_, &norm_});
    out.push_back({"lm_head", &lm_head_});
  }
  Shape hidden_shape(const MicroBatch& mb) override {  // of its input
    return token_rows(mb, norm_.tp(), norm_.parameters()[0]->global_shape()[0], name());
  }

 private:
  void run_backward(MicroBatch& mb, int layer_index, Tape* deferred) {
    MemoryCategoryScope scope(MemoryCategory::activation);
    MT_CHECK(mb.loss_scale > 0.0f,
             "head backward: set mb.loss_scale (1 / tokens in the global batch) before backward, "
             "got ",
             mb.loss_scale);
    Tape tape = mb.take(layer_index);
    mb.hidden = norm_.backward(lm_head_.backward(mb.loss_scale, tape, deferred), tape);
  }

  Norm norm_;
  std::string norm_name_;
  nn::LmHeadLoss lm_head_;
};

}  // namespace meshtrain

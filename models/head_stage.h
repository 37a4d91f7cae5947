// GPT-2's last stage: ln_f, logits = h @ wte^T (the LM head tied to the token embedding) and the
// cross-entropy of the targets. Forward adds the sum of token losses to mb.loss_sum; backward
// starts from d loss / d token loss = mb.loss_scale (1 / tokens of the global batch).
#pragma once

#include "parallel/model.h"

namespace meshtrain {

class HeadStage : public Stage {
 public:
  HeadStage(Parameter* ln_f_weight, Parameter* ln_f_bias, Parameter* wte)
      : ln_f_weight_(ln_f_weight), ln_f_bias_(ln_f_bias), wte_(wte) {}
  std::string name() const override { return "head"; }
  std::vector<Parameter*> parameters() override { return {ln_f_weight_, ln_f_bias_, wte_}; }
  // Reads mb.hidden [b, T, d] and mb.targets i32 [b, T]; leaves mb.hidden undefined.
  void forward(MicroBatch& mb, int stage_index) override;
  // Writes the gradient of the input hidden state to mb.hidden.
  void backward(MicroBatch& mb, int stage_index) override;

  // Logits [rows, V] of hidden [..., d], saving nothing (for sampling).
  Tensor logits(const Tensor& hidden);

 private:
  Parameter* ln_f_weight_;
  Parameter* ln_f_bias_;
  Parameter* wte_;
};

}  // namespace meshtrain

// GPT-2's first stage: hidden[b, t] = wte[tokens[b, t]] + wpe[t].
#pragma once

#include "parallel/model.h"

namespace meshtrain {

class EmbeddingStage : public Stage {
 public:
  EmbeddingStage(Parameter* wte, Parameter* wpe) : wte_(wte), wpe_(wpe) {}
  std::string name() const override { return "embedding"; }
  std::vector<Parameter*> parameters() override { return {wte_, wpe_}; }
  // Reads mb.tokens i32 [b, T] (T <= ctx), writes mb.hidden [b, T, d].
  void forward(MicroBatch& mb, int stage_index) override;
  // Reads d hidden; the tokens have no gradient, so mb.hidden is left undefined.
  void backward(MicroBatch& mb, int stage_index) override;

 private:
  Parameter* wte_;
  Parameter* wpe_;
};

}  // namespace meshtrain

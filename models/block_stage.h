// One GPT-2 transformer block (pre-LayerNorm):
//   r = x + c_proj(attention(c_attn(ln_1(x))));  out = r + mlp.c_proj(gelu(c_fc(ln_2(r)))).
#pragma once

#include "parallel/model.h"

namespace meshtrain {

struct BlockParameters {
  Parameter* ln_1_weight;
  Parameter* ln_1_bias;
  Parameter* attn_weight;  // c_attn [d, 3d]
  Parameter* attn_bias;
  Parameter* attn_proj_weight;  // attn.c_proj [d, d]
  Parameter* attn_proj_bias;
  Parameter* ln_2_weight;
  Parameter* ln_2_bias;
  Parameter* fc_weight;  // mlp.c_fc [d, 4d]
  Parameter* fc_bias;
  Parameter* mlp_proj_weight;  // mlp.c_proj [4d, d]
  Parameter* mlp_proj_bias;
};

class BlockStage : public Stage {
 public:
  BlockStage(std::string name, int heads, BlockParameters params)
      : name_(std::move(name)), heads_(heads), p_(params) {}
  std::string name() const override { return name_; }
  std::vector<Parameter*> parameters() override;
  // mb.hidden [b, T, d] -> [b, T, d].
  void forward(MicroBatch& mb, int stage_index) override;
  void backward(MicroBatch& mb, int stage_index) override;

 private:
  std::string name_;
  int heads_;
  BlockParameters p_;
};

}  // namespace meshtrain

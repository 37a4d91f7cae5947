// Causal multi-head self-attention on packed q | k | v rows (GPT-2's c_attn output), without
// projections: qkv [b * T, 3C] -> out [b * T, C]. Style `heads`: each tp rank computes heads / tp
// heads, the ones whose q, k, v columns its column-parallel c_attn produced.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class Attention : public Module {
 public:
  explicit Attention(int heads);
  std::vector<Parameter*> parameters() override { return {}; }
  void check_parallel(TpStyle style, int tp) const override;  // heads, dividing by tp
  void parallelize(TpStyle style, const TpSetup& setup) override;
  int local_heads() const { return local_heads_; }

  Tensor forward(const Tensor& qkv, int64_t batch, int64_t seq, Tape& tape);
  Tensor backward(const Tensor& d_out, Tape& tape);

 private:
  int heads_;
  int local_heads_;
};

}  // namespace meshtrain::nn

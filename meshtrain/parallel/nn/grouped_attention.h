// Causal grouped-query self-attention with rotary positions (Llama's), without projections:
// q [b * T, H * hd], k and v [b * T, KV * hd] -> out [b * T, H * hd]. Query head h reads key/value
// head h / (H / KV) (KV == H: multi-head attention, KV == 1: multi-query). Rotary embeddings turn
// q and k by their position in the sequence (Hugging Face's rotate-half convention, frequencies
// theta^(-2i/hd)) before the scores.
// Style `heads`: each tp rank computes H / tp query heads and the KV / tp key/value heads they
// read, the ones its column-parallel q, k and v projections produced; tp must divide both.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

struct QueryKeyValue {
  Tensor q, k, v;
};

class GroupedAttention : public Module {
 public:
  GroupedAttention(int heads, int kv_heads, float rope_theta);
  std::vector<Parameter*> parameters() override { return {}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;

  // Rotates q and k in place (they are the projections' outputs, which nothing else keeps).
  Tensor forward(const QueryKeyValue& qkv, int64_t batch, int64_t seq, Tape& tape);
  QueryKeyValue backward(const Tensor& d_out, Tape& tape);

 private:
  int heads_;
  int kv_heads_;
  float rope_theta_;
  int local_heads_;
  int local_kv_heads_;
};

}  // namespace meshtrain::nn

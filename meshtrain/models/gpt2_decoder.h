// Inference-only GPT-2 with a key/value cache: incremental decoding as llm.c, nanoGPT and Hugging
// Face's past_key_values do it. The decoder reads a single-rank GPT2's parameter values and runs
// the forward pass for new positions only; each block keeps the keys and values of every position
// it has encoded, so a new token costs one row through the linears and one attention row over the
// cache. No backward and no saved activations.
//
// It computes on the host in f32 (the CPU kernels of core/ops): it shares the parameter values of a
// model on the CPU and copies those of a model on an accelerator. The values are read when the
// decoder is built; build a new one after they change.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/models/decoder.h"
#include "meshtrain/models/gpt2.h"

namespace meshtrain {

class Gpt2Decoder : public Decoder {
 public:
  // InvalidArgument unless every parameter is available, f32 and whole (not tensor-parallel
  // sharded). Allocates the cache: per block, keys and values of ctx positions.
  explicit Gpt2Decoder(GPT2& model);

  const GPT2Config& config() const { return config_; }
  int64_t vocab() const override { return config_.vocab; }
  int64_t context() const override { return config_.ctx; }
  int64_t length() const override { return length_; }
  void reset() override { length_ = 0; }

  // Encodes tokens at positions [length(), length() + tokens.size()): each attends to the cached
  // positions and to the tokens before it (causal), and its keys and values join the cache. Returns
  // the logits [V] of the token after the last one. One call over a prompt is the prefill, one call
  // per token the decoding. InvalidArgument for no tokens, an id outside the vocabulary, or
  // positions past the context length (reset() and encode a shorter window to go on).
  std::vector<float> append(std::span<const int32_t> tokens) override;

 private:
  struct Block {
    Tensor ln_1_weight, ln_1_bias, attn_weight, attn_bias, attn_proj_weight, attn_proj_bias;
    Tensor ln_2_weight, ln_2_bias, fc_weight, fc_bias, mlp_proj_weight, mlp_proj_bias;
    // [H, ctx, head dim]: a head's cached keys (values) are one contiguous block of rows, the
    // operand of its score (output) GEMM.
    Tensor keys, values;
  };

  // The residual stream rows x_[0, n) through one block, for positions [length_, length_ + n).
  void run_block(Block& block, int64_t n);
  // Caches the keys and values of qkv_[0, n) and writes the attention output to att_[0, n).
  void attend(Block& block, int64_t n);

  GPT2Config config_;
  Tensor wte_, wpe_, ln_f_weight_, ln_f_bias_;
  std::vector<Block> blocks_;
  // Scratch for up to ctx new rows.
  Tensor x_, ln_, qkv_, att_, proj_, fc_, gelu_, mean_, rstd_;
  Tensor ids_, q_head_, out_head_, scores_, logits_;
  int64_t length_ = 0;
};

}  // namespace meshtrain

// Inference-only Llama 3 with a key/value cache, as transformers' past_key_values: the decoder
// reads a single-rank Llama's parameter values and runs the forward pass for new positions only.
// Each block caches the keys (after the rotary embedding, as transformers caches them) and the
// values of its KV key/value heads, not expanded per query head: query head h reads cached head h /
// (H / KV). A new token costs one row through the linears and one attention row over the cache.
//
// Like Gpt2Decoder (gpt2_decoder.h) it computes on the host in f32 with the CPU kernels of
// core/ops, sharing the values of a model on the CPU and copying those of one on an accelerator;
// the values are read when the decoder is built.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/models/decoder.h"
#include "meshtrain/models/llama.h"

namespace meshtrain {

class LlamaDecoder : public Decoder {
 public:
  // InvalidArgument unless every parameter is available, f32 and whole (not tensor-parallel
  // sharded). Allocates the cache: per block, keys and values of ctx positions per KV head.
  explicit LlamaDecoder(Llama& model);

  const LlamaConfig& config() const { return config_; }
  int64_t vocab() const override { return config_.vocab; }
  int64_t context() const override { return config_.ctx; }
  int64_t length() const override { return length_; }
  void reset() override { length_ = 0; }

  // Encodes tokens at positions [length(), length() + tokens.size()) (the rotary angles of those
  // positions): each attends to the cached positions and to the tokens before it, and its keys and
  // values join the cache. Returns the logits [V] after the last one. InvalidArgument for no
  // tokens, an id outside the vocabulary, or positions past the context length.
  std::vector<float> append(std::span<const int32_t> tokens) override;

 private:
  struct Block {
    // Linear weights [out, in], as the model stores them.
    Tensor input_layernorm, q_proj, k_proj, v_proj, o_proj;
    Tensor post_attention_layernorm, gate_proj, up_proj, down_proj;
    // [KV, ctx, head dim]: a key/value head's cached rows are one contiguous block.
    Tensor keys, values;
  };

  // The residual stream rows x_[0, n) through one block, for positions [length_, length_ + n).
  void run_block(Block& block, int64_t n);
  // Caches the keys and values of k_, v_ [0, n) and writes the attention of q_ [0, n) to att_.
  void attend(Block& block, int64_t n);

  LlamaConfig config_;
  float rope_theta_, eps_;  // as the model's layers use them, in f32
  Tensor embed_tokens_, norm_, lm_head_;
  std::vector<Block> blocks_;
  // Scratch for up to ctx new rows.
  Tensor x_, normed_, q_, k_, v_, att_, proj_, gate_, up_, act_, rstd_;
  Tensor ids_, q_head_, out_head_, scores_, logits_;
  int64_t length_ = 0;
};

}  // namespace meshtrain

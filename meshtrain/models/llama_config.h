// Llama 3 hyper-parameters (Hugging Face's LlamaConfig names in the comments), the published
// shapes as presets for planning and dry runs, and small presets for tests and the CPU demo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

struct LlamaConfig {
  int64_t vocab = 128256;       // V: vocab_size
  int64_t ctx = 8192;           // T: max_position_embeddings, the longest sequence
  int64_t dim = 4096;           // d: hidden_size
  int64_t ffn_dim = 14336;      // intermediate_size: the gated MLP's width
  int64_t layers = 32;          // L: num_hidden_layers
  int64_t heads = 32;           // H: num_attention_heads, dividing d
  int64_t kv_heads = 8;         // KV: num_key_value_heads, dividing H
  double rope_theta = 500000;   // rope_theta: the rotary base
  double rms_norm_eps = 1e-5;   // rms_norm_eps
  bool tie_embeddings = false;  // tie_word_embeddings: lm_head is embed_tokens

  // Throws InvalidArgument saying which field is wrong and what was expected.
  void validate() const;
  int64_t head_dim() const { return dim / heads; }
  // Parameters counted once (a tied head once).
  int64_t num_parameters() const;
  std::string describe() const;  // "V=128256 T=8192 d=4096 ffn=14336 L=32 H=32 KV=8"
  bool operator==(const LlamaConfig&) const = default;
};

// "llama3-8b", "llama3-70b", "llama3.2-1b", "llama3.2-3b", "llama-tiny" (tests), "llama-demo"
// (byte-level CPU demo). An unknown name is an InvalidArgument that lists the known ones.
LlamaConfig llama_preset(std::string_view name);
std::vector<std::string> llama_preset_names();

}  // namespace meshtrain

// GPT-2 hyper-parameters, the Hugging Face presets and small presets for tests and the CPU demo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

struct GPT2Config {
  int64_t vocab = 50257;  // V
  int64_t ctx = 1024;     // T: the longest sequence (rows of wpe)
  int64_t dim = 768;      // d
  int64_t layers = 12;    // L
  int64_t heads = 12;     // H, dividing d

  // Throws InvalidArgument saying which field is wrong and what was expected.
  void validate() const;
  int64_t head_dim() const { return dim / heads; }
  // Parameters counted once (the LM head is tied to wte).
  int64_t num_parameters() const;
  std::string describe() const;  // "V=50257 T=1024 d=768 L=12 H=12"
  bool operator==(const GPT2Config&) const = default;
};

// "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "tiny" (tests), "demo" (byte-level CPU demo).
// An unknown name is an InvalidArgument that lists the known ones.
GPT2Config gpt2_preset(std::string_view name);
std::vector<std::string> gpt2_preset_names();

}  // namespace meshtrain

// GPT-2 weights in safetensors files, named as Hugging Face names them. Keys may carry a
// "transformer." prefix; the attention-mask buffers of Hugging Face's GPT-2 (".attn.bias",
// ".attn.masked_bias") are ignored.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/safetensors_set.h"
#include "meshtrain/parallel/parameter_source.h"

namespace meshtrain {

// The parameter name a checkpoint key stands for, or nullopt for a buffer to ignore.
std::optional<std::string> checkpoint_parameter_name(std::string_view key);

// The values of the model's parameters in a safetensors file or in the shards of an index
// (SafetensorsSet), as a ParameterSource: each rank reads only the bytes of its own pieces. The
// constructor checks the files against the parameters: InvalidArgument naming the key for a
// missing parameter, an unknown key, a key given twice, a wrong (global) shape or a dtype other
// than F32 and BF16; IoError for an unreadable or corrupt file or index. One object per rank (it
// holds the files open).
class SafetensorsValues : public ParameterSource {
 public:
  SafetensorsValues(const std::string& path, const std::vector<Parameter*>& params);
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override;

 private:
  std::string path_;
  mutable SafetensorsSet weights_;
  std::map<std::string, std::string> key_of_;  // parameter name -> the key that holds it
};

// Loads every parameter's full value (which must be available) from a safetensors file or a sharded
// index. InvalidArgument naming the key for
// a missing parameter, an unknown key, a key given twice, a wrong shape or a dtype other than F32
// and BF16; IoError for an unreadable or corrupt file.
void load_parameters(const std::vector<Parameter*>& params, const std::string& path);

// Saves the parameters' values, in order, stored as dtype (f32 or bf16). For sharded parameters
// use SafetensorsWriter directly and write each one as it is gathered.
void save_parameters(const std::vector<Parameter*>& params, const std::string& path,
                     DType dtype = DType::f32);

}  // namespace meshtrain

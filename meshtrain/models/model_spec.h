// ModelSpec: a model family with its configuration, everything a training run knows of a model
// before and after it builds it: the trainer builds and initialises it through this interface,
// checkpoints record its family and options, exports carry its metadata, sampling asks for its
// decoder and the run's estimates read its sizes. A family makes one from checked options
// (meshtrain/models/model_registry.h); GPT-2 is one family (meshtrain/models/gpt2_family.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "meshtrain/core/device.h"
#include "meshtrain/models/decoder.h"
#include "meshtrain/parallel/declared_options.h"
#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/parameter_source.h"

namespace meshtrain {

class ModelSpec {
 public:
  virtual ~ModelSpec() = default;
  // The family's registered name ("gpt2").
  virtual std::string family() const = 0;
  // The configuration as the family's option values, complete and canonical (what a checkpoint
  // records and a resume compares): the registry recreates the same model from them.
  virtual TextOptions options() const = 0;
  // One line for people: "GPT-2 V=256 T=64 d=128 L=4 H=4".
  virtual std::string describe() const = 0;
  virtual int64_t vocab() const = 0;
  // The longest sequence the model takes (its learned positions); 0: no limit.
  virtual int64_t max_seq() const = 0;
  // Parameters counted once (a tied parameter once).
  virtual int64_t num_parameters() const = 0;
  // Training FLOPs (forward and backward) of `tokens` tokens in sequences of `seq`: 6 per
  // parameter per token plus attention's, the numerator of MFU.
  virtual double training_flops(double tokens, int64_t seq) const = 0;

  // The model with every parameter named (Hugging Face names) and shaped, on `device`, without
  // tensors: a plan fills each rank's pieces (ParallelPlan::apply), so no rank holds it whole.
  virtual std::unique_ptr<Model> build(Device device) const = 0;
  // The initial values under `seed`, each rank generating only its own pieces, independent of
  // the layout.
  virtual std::unique_ptr<ParameterSource> init_values(uint64_t seed) const = 0;
  // What an exported safetensors file records beside the tensors, so that the configuration reads
  // back from the file (GPT-2: the head count, which the shapes do not give).
  virtual std::map<std::string, std::string> safetensors_metadata() const { return {}; }
  // Hugging Face's config.json of the model (JSON text), which an export writes beside its
  // safetensors file so that transformers and --init read the configuration from the folder; ""
  // when the family has none.
  virtual std::string hf_config() const { return ""; }
  // A decoder for sampling over `whole`, a model build() made whose values are all set; nullptr
  // when the family has none.
  virtual std::unique_ptr<Decoder> decoder(Model& /*whole*/) const { return nullptr; }
};

using ModelSpecPtr = std::shared_ptr<const ModelSpec>;

}  // namespace meshtrain

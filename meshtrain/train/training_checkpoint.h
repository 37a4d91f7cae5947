// What a training run saves and resumes from (docs/checkpoint.md): this rank's parameter slices
// and AdamW moments as checkpoint tensors, and the run's metadata — step, optimizer step count,
// model, batch contract, data fingerprint, mesh — with the checks a resume makes against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshtrain/train/train_config.h"
#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/checkpoint_writer.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/model_registry.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/parallel/parameter_source.h"
#include "meshtrain/parallel/trainable_state.h"

namespace meshtrain {

// `path` itself when it is a checkpoint (a step directory with an index), else the newest complete
// checkpoint in the folder `path`; InvalidArgument naming `flag` when there is none.
std::string find_checkpoint(const std::string& path, std::string_view flag);
// A folder (a checkpoint, or a folder of them) that is not a Hugging Face model folder.
bool is_checkpoint_path(const std::string& path);
// InvalidArgument when the folder `dir` (if any) already holds a complete checkpoint past `step`,
// where a run writing its checkpoints there starts: a later step is another run's, or the
// abandoned future of the run this one restarts from an earlier step, and --resume DIR and --keep
// would take it for this run's newest.
void check_no_later_checkpoints(const std::string& dir, int64_t step);
// The model as checkpoint metadata records it ({"model": {"family": "gpt2", "vocab": "256", ...}},
// its family and options), and back through the registry. A record without a family is GPT-2's
// (checkpoints written before the model registry).
nlohmann::json model_metadata(const ModelSpec& model);
ModelSpecPtr checkpoint_model(const CheckpointReader& reader, const ModelRegistry& registry);

// What the data position means: the same tokens in the same order.
struct DataFingerprint {
  int64_t tokens = 0;
  uint64_t hash = 0;  // FNV-1a over the tokens' bytes as their file stores them (token_bytes)
};
DataFingerprint fingerprint_tokens(const TokenFile& data);

// The names of a parameter's AdamW moments in a checkpoint.
std::string exp_avg_name(const std::string& param);
std::string exp_avg_sq_name(const std::string& param);

nlohmann::json run_metadata(const TrainConfig& config, const MeshLayout& mesh,
                            const DataFingerprint& data, int64_t step, int64_t optimizer_steps);
// InvalidArgument naming the first difference in the model, the batch contract (global batch and
// sequence length) or the data between `config` and the checkpoint the metadata came from.
void check_resumable(const nlohmann::json& metadata, const TrainConfig& config,
                     const DataFingerprint& data, const std::string& checkpoint);

// This rank's share of the training state: every parameter slice it owns (replicas and tied
// copies are stored once, by their owner) and, for trainable ones, the two AdamW moments.
std::vector<StoredTensor> stored_training_state(TrainableState& state, AdamW& optimizer,
                                                const DeviceMesh& mesh, Model& model);
// Restores AdamW from the checkpoint: its step count and this rank's moments (every slot it
// steps, replicas too).
void restore_optimizer(CheckpointReader& reader, TrainableState& state, AdamW& optimizer,
                     const DeviceMesh& mesh, Model& model);

// A checkpoint's parameter values as the source a plan places a model from: each rank reads only
// its own slices.
class CheckpointValues : public ParameterSource {
 public:
  explicit CheckpointValues(CheckpointReader& reader) : reader_(reader) {}
  void read(const Parameter& p, const std::vector<LocalPiece>& pieces,
            const Tensor& local) const override {
    reader_.read(p.name(), p.global_shape(), local, pieces);
  }

 private:
  CheckpointReader& reader_;
};

}  // namespace meshtrain

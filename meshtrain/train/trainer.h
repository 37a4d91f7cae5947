// Trainer: one rank's view of a training run — the mesh, the model, the parallel plan built from the
// mesh's axes and the built-in plugins, the data, AdamW — feeding batches to the step runner and
// stepping the optimizer. Every rank of the world constructs one with the same config and calls
// the same methods in the same order (SPMD).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/core/comm/communicator.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/adamw.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/parallel/global_parameters.h"
#include "meshtrain/parallel/parallel_plan.h"
#include "meshtrain/train/step_metrics.h"
#include "meshtrain/train/train_config.h"
#include "meshtrain/train/training_checkpoint.h"

namespace meshtrain {

class Trainer {
 public:
  Trainer(const TrainConfig& config, Communicator& world, MemoryTracker& memory);

  // Runs the next optimizer step (collective) and returns its metrics.
  StepMetrics step();
  int64_t steps_done() const { return step_; }
  // Collective, for a run that validates (config.val_every > 0): the mean token loss of the
  // model as it stands over the validation batches, forward only. Changes nothing that training
  // reads (parameters, optimizer, data position).
  double validate();
  // Where the validation batches come from, for the console ("" without validation).
  std::string validation_source() const;

  Model& model() { return *model_; }
  // Where this rank keeps its state (its GPU under --device cuda).
  Device device() const { return device_; }
  DeviceMesh& mesh() { return *mesh_; }
  const ParallelPlan& plan() const { return plan_; }
  // What runs a step's micro-batches (a PipelineRunner under pipeline parallelism).
  StepRunner& runner() { return *parallel_.runner; }
  // What this rank holds and the optimizer steps (FSDP: its shards).
  TrainableState& state() { return *parallel_.state; }
  int rank() const { return world_.rank(); }
  // The bytes this rank has sent so far on each mesh axis's group and on "dp" (both data axes
  // flattened), in mesh order with "dp" last: the strategies' traffic (the world group's own
  // exchanges of figures are not counted).
  std::vector<std::pair<std::string, uint64_t>> bytes_sent_by_group() const;

  // Collective: world rank 0 calls fn on every parameter's global fp32 value (Hugging Face shape),
  // one parameter at a time (meshtrain/parallel/global_parameters.h); the other ranks only send.
  void gather_parameters(const ParameterVisitor& fn);
  // Collective: rank 0 writes the full model to a safetensors file (Hugging Face names, the
  // model's metadata).
  void save(const std::string& path);
  // Collective: writes a distributed checkpoint of the run as it stands (after steps_done() steps)
  // to config.checkpoint_dir and returns its path. `after_file` is save_checkpoint's test hook.
  std::string save_checkpoint(const std::function<void(const std::string&)>& after_file = {});
  // The checkpoint this run resumed from (empty for a fresh run).
  const std::string& resumed_from() const { return resumed_from_; }
  // Collective: rank 0 returns text sampled from the trained model (byte-level models of a
  // family with a decoder), calling on_byte (when set) with each byte as it is drawn; other ranks
  // return an empty string.
  std::string sample(int64_t bytes, uint64_t seed,
                     const std::function<void(int32_t)>& on_byte = {});

 private:
  uint64_t strategy_bytes_sent() const;
  // Validation's tokens (none without validation), held out of `data` when they come from it.
  std::vector<Token> validation_tokens(std::vector<Token>& data) const;
  double global_batch_tokens() const;
  // This rank's part of a batch as the step's micro-batches.
  std::vector<MicroBatch> split_micro_batches(const TokenBatch& batch) const;

  TrainConfig config_;
  Communicator& world_;
  MemoryTracker& memory_;
  std::unique_ptr<DeviceMesh> mesh_;
  Device device_;
  std::unique_ptr<Model> model_;
  ParallelPlan plan_;
  ParallelModel parallel_;
  std::unique_ptr<TokenBatches> batches_;
  std::unique_ptr<TokenBatches> val_batches_;  // null without validation
  AdamW optimizer_;
  DataFingerprint data_;
  int64_t step_ = 0;
  // MFU's denominator: the published peak of one of the run's GPUs and how many run it (0 and 0
  // on CPUs and unlisted GPUs).
  double peak_flops_per_device_ = 0.0;
  int devices_ = 0;
  std::string resumed_from_;
};

}  // namespace meshtrain

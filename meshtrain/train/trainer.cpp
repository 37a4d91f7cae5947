#include "meshtrain/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/checkpoint/hf_config_file.h"
#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/trace/recorder.h"
#include "meshtrain/mesh/axis_names.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/sampling.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/parallel/grad_norm.h"
#include "meshtrain/train/bound_strategies.h"
#include "meshtrain/train/device_peak.h"

namespace meshtrain {

namespace {
using Clock = std::chrono::steady_clock;

AdamWConfig adamw_config(const TrainConfig& config) {
  AdamWConfig c;
  c.weight_decay = config.weight_decay;
  return c;
}

// A GPU backend's world is bound to its rank's GPU; local ranks share the GPUs round robin.
Device rank_device(const TrainConfig& config, const Communicator& world) {
  const Device bound = world.exchange_device();
  return bound.is_cuda() ? bound : config.rank_device(world.rank());
}

template <typename T>
T max_of(const std::vector<T>& values) {
  return *std::max_element(values.begin(), values.end());
}
}  // namespace

Trainer::Trainer(const TrainConfig& config, Communicator& world, MemoryTracker& memory)
    : config_(config), world_(world), memory_(memory), optimizer_(adamw_config(config)) {
  config_.validate();
  mesh_ = std::make_unique<DeviceMesh>(world_, config_.effective_mesh());
  const int64_t dp = mesh_->axis_size(mesh_axis::dp), dp_rank = mesh_->axis_rank(mesh_axis::dp);
  TokenFile data;
  std::vector<Token> val_tokens;
  if (config_.dry_run()) {  // batches of the run's shapes, no data
    batches_ = std::make_unique<TokenBatches>(
        TokenBatches::shape_only(config_.batch, config_.seq, dp, dp_rank));
  } else {
    data = read_token_file(config_.data_path);
    val_tokens = validation_tokens(data.tokens);
    const int64_t step_tokens = config_.batch * config_.seq + 1;
    MT_CHECK(
        static_cast<int64_t>(data.tokens.size()) >= step_tokens, "--data '", config_.data_path,
        "' holds ", data.tokens.size(), " tokens",
        config_.holds_out_validation() ? " for training (the last tenth goes to validation)" : "",
        ", fewer than one step reads (--batch x --seq + 1 = ", step_tokens,
        "): every batch would repeat the same data; use a longer file or a smaller --batch or "
        "--seq");
    // The tokens training reads: a resume with another validation split is other data.
    data_ = fingerprint_tokens(data);
  }

  // Sharded initialisation: the model has no tensors, and each rank fills only its own pieces,
  // from a checkpoint, a safetensors file or the seed.
  device_ = rank_device(config_, world_);
  model_ = config_.model->build(device_);
  std::unique_ptr<CheckpointReader> checkpoint;
  std::unique_ptr<ParameterSource> values;
  if (!config_.resume_dir.empty()) {
    checkpoint = std::make_unique<CheckpointReader>(find_checkpoint(config_.resume_dir, "--resume"));
    check_resumable(checkpoint->metadata(), config_, data_, checkpoint->path());
  } else if (is_checkpoint_path(config_.init_path)) {
    checkpoint = std::make_unique<CheckpointReader>(find_checkpoint(config_.init_path, "--init"));
  }
  // Each process lists the folder itself: a file system that shows ranks different steps (a stale
  // NFS cache) must not let them load different checkpoints.
  if (checkpoint)
    require_same_on_every_rank(world_, checkpoint->path(), "the checkpoint to load (the newest "
                               "complete one in the folder, as each rank sees it)");
  check_no_later_checkpoints(config_.checkpoint_dir,
                             config_.resume_dir.empty() ? 0 : checkpoint->step());
  if (checkpoint)
    values = std::make_unique<CheckpointValues>(*checkpoint);
  else if (!config_.init_path.empty())
    values = std::make_unique<SafetensorsValues>(hf_weights_path(config_.init_path),
                                                 model_->parameters());
  else
    values = config_.model->init_values(config_.seed);

  for (BoundStrategy& bound : bind_strategies(config_))
    plan_.add(std::move(bound.strategy), bound.axes);
  parallel_ = plan_.apply(*mesh_, *model_, values.get());
  parallel_.engine->set_activation_checkpointing(config_.ac);
  // A dry run's one step shows a steady step: AdamW's moments, which the first step allocates,
  // are held through every later one.
  if (config_.dry_run()) optimizer_.prepare_state(parallel_.state->optimizer_slots());

  if (!config_.resume_dir.empty()) {
    restore_optimizer(*checkpoint, *parallel_.state, optimizer_, *mesh_, *model_);
    step_ = checkpoint->step();
    MT_CHECK(step_ <= config_.steps, "--resume ", checkpoint->path(), ": the checkpoint (step ",
             step_, ") is past --steps ", config_.steps, " (the run's total)");
    resumed_from_ = checkpoint->path();
  }

  if (device_.is_cuda()) {
    peak_flops_per_device_ =
        published_dense_peak_flops(cuda_device_name(device_.index), parallel_.compute_dtype);
    // Local ranks share the visible GPUs; other backends run one rank per GPU.
    devices_ = config_.backend == BackendKind::local ? std::min(world_.size(), cuda_device_count())
                                                     : world_.size();
  }

  if (!batches_)
    batches_ = std::make_unique<TokenBatches>(std::move(data.tokens), config_.model->vocab(),
                                              config_.batch, config_.seq, dp, dp_rank);
  if (config_.validates())
    val_batches_ = std::make_unique<TokenBatches>(std::move(val_tokens), config_.model->vocab(),
                                                  config_.batch, config_.seq, dp, dp_rank);
}

std::vector<Token> Trainer::validation_tokens(std::vector<Token>& data) const {
  if (!config_.validates()) return {};
  std::vector<Token> tokens;
  if (config_.holds_out_validation()) {
    const auto held_out = data.end() - static_cast<int64_t>(data.size()) / kValHeldOutDivisor;
    tokens.assign(held_out, data.end());
    data.erase(held_out, data.end());
  } else {
    tokens = read_token_file(config_.val_data_path).tokens;
  }
  // Distinct batches: reading past the end would wrap round and repeat tokens.
  const int64_t needed = config_.val_batches * config_.batch * config_.seq + 1;
  MT_CHECK(
      static_cast<int64_t>(tokens.size()) >= needed,
      "validation reads --val-batches x --batch x --seq + 1 = ", needed, " tokens, but ",
      validation_source(), " holds ", tokens.size(), "; use fewer --val-batches, or a longer ",
      config_.holds_out_validation() ? "--data file (or a --val-data file)" : "--val-data file");
  tokens.resize(static_cast<size_t>(needed));  // all that validation reads
  const Token largest = *std::max_element(tokens.begin(), tokens.end());
  MT_CHECK(static_cast<int64_t>(largest) < config_.model->vocab(), validation_source(),
           " holds token ", largest, ", outside the model's vocabulary of ",
           config_.model->vocab());
  return tokens;
}

std::string Trainer::validation_source() const {
  if (!config_.validates()) return "";
  if (!config_.holds_out_validation()) return "--val-data '" + config_.val_data_path + "'";
  return "the last tenth of --data '" + config_.data_path + "' (held out of training)";
}

double Trainer::validate() {
  MT_CHECK(val_batches_, "validate: the run has no validation (--val-every N)");
  const trace::Scope span(trace::Kind::other, "validation");
  double sum = 0.0;
  for (int64_t k = 0; k < config_.val_batches; ++k) {
    std::vector<MicroBatch> micro_batches = split_micro_batches(val_batches_->batch(k));
    sum += parallel_.runner->evaluate(micro_batches, global_batch_tokens());
  }
  // Every batch holds as many tokens, so the mean of their means is the mean over all of them.
  return sum / static_cast<double>(config_.val_batches);
}

double Trainer::global_batch_tokens() const {
  return static_cast<double>(config_.batch * config_.seq);
}

std::vector<MicroBatch> Trainer::split_micro_batches(const TokenBatch& batch) const {
  const int64_t micro_rows = batches_->local_batch() / config_.grad_accum;
  std::vector<MicroBatch> micro_batches(static_cast<size_t>(config_.grad_accum));
  for (int64_t k = 0; k < config_.grad_accum; ++k) {
    micro_batches[k].tokens = batch.tokens.rows(k * micro_rows, micro_rows);
    micro_batches[k].targets = batch.targets.rows(k * micro_rows, micro_rows);
  }
  return micro_batches;
}

std::vector<std::pair<std::string, uint64_t>> Trainer::bytes_sent_by_group() const {
  return mesh_->bytes_sent_by_group();
}

uint64_t Trainer::strategy_bytes_sent() const {
  uint64_t total = 0;
  for (const auto& [group, bytes] : bytes_sent_by_group()) total += bytes;
  return total;
}

StepMetrics Trainer::step() {
  // The step's span in the trace: the step boundary (docs/tracing.md).
  const trace::Scope step_span(trace::Kind::step,
                               [&] { return "step " + std::to_string(step_ + 1); });
  memory_.reset_peaks();
  const uint64_t bytes_before = strategy_bytes_sent();
  const double waited_before = comm_wait_seconds();
  const auto start = Clock::now();

  const double global_tokens = global_batch_tokens();
  std::vector<MicroBatch> micro_batches = split_micro_batches(batches_->batch(step_));
  const double loss = parallel_.runner->run(micro_batches, global_tokens);

  TrainableState& state = *parallel_.state;
  std::vector<OptimizerSlot> slots = state.optimizer_slots();
  std::optional<trace::Scope> update_span;  // the gradient norm, clipping and AdamW
  update_span.emplace(trace::Kind::other, "optimizer update");
  const double grad_norm = global_grad_norm(slots, *mesh_);
  // Every rank holds the same reduced figures, so every rank stops here, before the update.
  if (!std::isfinite(loss) || !std::isfinite(grad_norm))
    throw Error(detail::concat("step ", step_ + 1, ": the loss is ", loss,
                               " and the gradient norm ", grad_norm,
                               "; stopping before the optimizer step (the parameters are those "
                               "of the previous step; try a lower --lr or check the data)"));
  if (config_.clip > 0.f) clip_grads(slots, grad_norm, config_.clip);
  const float lr = config_.lr.at(step_);
  optimizer_.step(slots, lr);
  state.zero_grad();
  // An update can overflow where the loss and gradients were finite (a huge --lr): caught here,
  // before this step is checkpointed or saved, not at the next step's loss.
  std::vector<Tensor> updated;
  for (const OptimizerSlot& slot : slots) updated.push_back(slot.param);
  const double params_sum_squares = ops::sum_squares(updated);
  // A GPU step ends when its queued kernels have run.
  device_synchronize(device_, std::chrono::seconds(config_.timeout_s));
  update_span.reset();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double exposed = comm_wait_seconds() - waited_before;  // every strategy's, and the loss's

  // Reduce the step's figures over ranks (on the world communicator, outside the counted groups).
  const MemoryStats mem = memory_.stats(config_.device);
  // The state a rank holds between steps, wherever it lives (offloaded: on the host).
  uint64_t sharded = 0;
  for (const DeviceKind kind : {DeviceKind::cpu, DeviceKind::cuda, DeviceKind::meta}) {
    const MemoryStats held = memory_.stats(kind);
    sharded += held[MemoryCategory::param].current + held[MemoryCategory::grad].current +
               held[MemoryCategory::optimizer].current;
  }
  const std::vector<uint64_t> mine = {strategy_bytes_sent() - bytes_before,
                                      mem.total.peak,
                                      sharded,
                                      mem.model_state.peak,
                                      mem[MemoryCategory::unsharded_param].peak,
                                      mem[MemoryCategory::unsharded_grad].peak,
                                      mem[MemoryCategory::comm].peak};
  const std::vector<uint64_t> counts = all_gather_values(world_, mine);
  // Every rank runs the same kind of runner: a pipeline's all have a bubble, others none.
  const std::optional<double> bubble = parallel_.runner->last_bubble_s();
  const std::vector<double> reals = all_gather_values(
      world_, std::vector<double>{seconds, exposed, params_sum_squares, bubble.value_or(0.0)});
  constexpr size_t kReals = 4;
  for (size_t r = 0; r < reals.size() / kReals; ++r)
    if (!std::isfinite(reals[kReals * r + 2]))
      throw Error(detail::concat(
          "step ", step_ + 1, ": the optimizer step made parameters non-finite (rank ", r,
          ") though the loss (", loss, ") and the gradient norm (", grad_norm,
          ") were finite; stopping before this step is checkpointed or saved (try a lower --lr)"));

  StepMetrics m;
  m.step = step_;
  m.lr = lr;
  m.grad_norm = grad_norm;
  m.loss = loss;
  const size_t n = static_cast<size_t>(world_.size()), k = mine.size();
  for (size_t r = 0; r < n; ++r) {
    const uint64_t* c = &counts[r * k];
    m.step_time_s = std::max(m.step_time_s, reals[kReals * r]);
    m.exposed_comm_s = std::max(m.exposed_comm_s, reals[kReals * r + 1]);
    if (bubble) m.bubble_s = std::max(m.bubble_s.value_or(0.0), reals[kReals * r + 3]);
    m.comm_bytes = std::max(m.comm_bytes, c[0]);
    m.peak_mem_per_rank.push_back(c[1]);
    m.sharded_state_bytes = std::max(m.sharded_state_bytes, c[2]);
    m.model_state_peak_bytes = std::max(m.model_state_peak_bytes, c[3]);
    m.unsharded_param_peak_bytes = std::max(m.unsharded_param_peak_bytes, c[4]);
    m.unsharded_grad_peak_bytes = std::max(m.unsharded_grad_peak_bytes, c[5]);
    m.comm_staging_peak_bytes = std::max(m.comm_staging_peak_bytes, c[6]);
  }
  m.peak_mem_bytes = max_of(m.peak_mem_per_rank);
  m.tokens_per_s = global_tokens / m.step_time_s;
  m.model_flops_per_s = config_.model->training_flops(global_tokens, config_.seq) / m.step_time_s;
  m.mfu = model_flop_utilisation(m.model_flops_per_s, peak_flops_per_device_, devices_);
  ++step_;
  return m;
}

void Trainer::gather_parameters(const ParameterVisitor& fn) {
  meshtrain::gather_parameters(*parallel_.state, *mesh_, *model_, fn);
}

void Trainer::save(const std::string& path) {
  // Written beside its final name and renamed into place once complete and synced: a failure
  // never leaves a partial file under `path`.
  std::optional<AtomicFile> file;
  std::unique_ptr<SafetensorsWriter> writer;  // closed before `file` removes a failed write
  if (rank() == 0) {
    file.emplace(path);
    std::vector<SafetensorsSpec> specs;
    for (Parameter* p : model_->parameters())
      specs.push_back({p->name(), DType::f32, p->global_shape()});
    std::map<std::string, std::string> metadata = config_.model->safetensors_metadata();
    metadata["format"] = "pt";
    writer = std::make_unique<SafetensorsWriter>(file->partial_path(), std::move(specs),
                                                 std::move(metadata));
  }
  gather_parameters([&](const Parameter& p, const Tensor& value) {
    if (writer) writer->write(p.name(), value);
  });
  if (!writer) return;
  writer->finish();
  file->commit();
  write_hf_config(*config_.model, path);  // after the tensors: a folder never holds it alone
}

std::string Trainer::save_checkpoint(const std::function<void(const std::string&)>& after_file) {
  MT_CHECK(!config_.checkpoint_dir.empty(), "save_checkpoint needs --checkpoint-dir");
  CheckpointSaveOptions options;
  options.keep = config_.keep;
  options.after_file = after_file;
  return meshtrain::save_checkpoint(
      world_, config_.checkpoint_dir, step_,
      stored_training_state(*parallel_.state, optimizer_, *mesh_, *model_),
      run_metadata(config_, mesh_->layout(), data_, step_, optimizer_.steps_taken()), options);
}

std::string Trainer::sample(int64_t bytes, uint64_t seed,
                            const std::function<void(int32_t)>& on_byte) {
  MT_CHECK(config_.model->vocab() == 256,
           "sampling text needs a byte-level model (vocab 256), got vocab ",
           config_.model->vocab());
  // Rank 0 gathers a whole copy on the host, where the decoders run.
  std::unique_ptr<Model> whole;
  std::map<std::string, Parameter*> by_name;
  if (rank() == 0) {
    whole = config_.model->build(Device::cpu());
    MemoryCategoryScope scope(MemoryCategory::param);
    for (Parameter* p : whole->parameters()) {
      p->set_value(Tensor::empty(p->global_shape(), DType::f32, Device::cpu()));
      by_name[p->name()] = p;
    }
  }
  gather_parameters([&](const Parameter& p, const Tensor& value) {
    if (whole) by_name.at(p.name())->value().copy_from(value);
  });
  if (!whole) return "";
  const std::unique_ptr<Decoder> decoder = config_.model->decoder(*whole);
  if (!decoder) return "";  // the family has no decoder: nothing to sample
  SampleOptions options;
  options.count = bytes;
  options.temperature = kDefaultSampleTemperature;
  options.seed = seed;
  return sample_text(*decoder, "\n", options, on_byte);
}

}  // namespace meshtrain

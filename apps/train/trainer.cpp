#include "apps/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/comm/gather_values.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/safetensors.h"
#include "models/sampling.h"
#include "models/token_file.h"

namespace meshtrain {

namespace {
using Clock = std::chrono::steady_clock;

AdamWConfig adamw_config(const TrainConfig& config) {
  AdamWConfig c;
  c.weight_decay = config.weight_decay;
  return c;
}

// FSDP binds to the data axes the mesh has (dp_replicate and/or dp_shard).
std::vector<std::string> data_axes(const MeshLayout& layout) {
  std::vector<std::string> axes;
  for (const char* axis : {"dp_replicate", "dp_shard"})
    if (layout.has_axis(axis)) axes.push_back(axis);
  return axes;
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
  GPT2Options options;
  options.seed = config_.seed;
  model_ = std::make_unique<GPT2>(config_.model, options);
  if (!config_.init_path.empty()) load_parameters(model_->parameters(), config_.init_path);

  const std::vector<std::string> axes = data_axes(mesh_->layout());
  if (!axes.empty()) {
    auto fsdp = std::make_unique<FsdpStrategy>(config_.fsdp);
    fsdp_ = fsdp.get();
    plan_.add(std::move(fsdp), axes);
  }
  parallel_ = plan_.apply(*mesh_, *model_);

  batches_ = std::make_unique<TokenBatches>(read_token_file(config_.data_path), config_.model.vocab,
                                            config_.batch, config_.seq, mesh_->axis_size("dp"),
                                            mesh_->axis_rank("dp"));
}

std::vector<Communicator*> Trainer::strategy_comms() const {
  std::vector<Communicator*> comms;
  for (const MeshAxis& axis : mesh_->layout().axes()) comms.push_back(&mesh_->comm(axis.name));
  comms.push_back(&mesh_->comm("dp"));  // FSDP bound to both data axes runs on the flattened "dp"
  return comms;
}

uint64_t Trainer::strategy_bytes_sent() const {
  uint64_t total = 0;
  for (Communicator* c : strategy_comms()) total += c->counters().total_sent();
  return total;
}

StepMetrics Trainer::step() {
  memory_.reset_peaks();
  const uint64_t bytes_before = strategy_bytes_sent();
  const double exposed_before = fsdp_ ? fsdp_->exposed_comm_seconds() : 0.0;
  const auto start = Clock::now();

  Engine& engine = *parallel_.engine;
  const TokenBatch batch = batches_->batch(step_);
  const int64_t micro_rows = batches_->local_batch() / config_.grad_accum;
  const double global_tokens = static_cast<double>(config_.batch * config_.seq);
  double loss_sum = 0.0;
  for (int k = 0; k < config_.grad_accum; ++k) {
    MicroBatch mb;
    mb.tokens = batch.tokens.rows(k * micro_rows, micro_rows);
    mb.targets = batch.targets.rows(k * micro_rows, micro_rows);
    mb.loss_scale = static_cast<float>(1.0 / global_tokens);
    engine.begin_micro_batch(k, static_cast<int>(config_.grad_accum));
    engine.forward(mb);
    engine.backward(mb);
    loss_sum += mb.loss_sum;
  }
  engine.finish_backward();

  TrainableState& state = *parallel_.state;
  std::vector<OptimizerSlot> slots = state.optimizer_slots();
  double grad_norm = -1.0;
  if (config_.clip > 0.f) {
    grad_norm = std::sqrt(state.grad_norm_squared());
    clip_grads(slots, grad_norm, config_.clip);
  }
  const float lr = config_.lr.at(step_);
  optimizer_.step(slots, lr);
  state.zero_grad();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // Reduce the step's figures over ranks (on the world communicator, outside the counted groups).
  const MemoryStats mem = memory_.stats(DeviceKind::cpu);
  const uint64_t sharded = mem[MemoryCategory::param].current + mem[MemoryCategory::grad].current +
                           mem[MemoryCategory::optimizer].current;
  const std::vector<uint64_t> mine = {strategy_bytes_sent() - bytes_before,
                                      mem.total.peak,
                                      sharded,
                                      mem.model_state.peak,
                                      mem[MemoryCategory::unsharded_param].peak,
                                      mem[MemoryCategory::unsharded_grad].peak,
                                      mem[MemoryCategory::comm].peak};
  const std::vector<uint64_t> counts = all_gather_values(world_, mine);
  const std::vector<double> reals = all_gather_values(
      world_, std::vector<double>{loss_sum, seconds,
                                  (fsdp_ ? fsdp_->exposed_comm_seconds() : 0.0) - exposed_before});

  StepMetrics m;
  m.step = step_;
  m.lr = lr;
  m.grad_norm = grad_norm;
  const size_t n = static_cast<size_t>(world_.size()), k = mine.size();
  // Each data rank holds distinct sequences, so the global loss is the sum over data ranks.
  for (size_t r = 0; r < n; ++r) {
    const uint64_t* c = &counts[r * k];
    m.loss += reals[3 * r];
    m.step_time_s = std::max(m.step_time_s, reals[3 * r + 1]);
    m.exposed_comm_s = std::max(m.exposed_comm_s, reals[3 * r + 2]);
    m.comm_bytes = std::max(m.comm_bytes, c[0]);
    m.peak_mem_per_rank.push_back(c[1]);
    m.sharded_state_bytes = std::max(m.sharded_state_bytes, c[2]);
    m.model_state_peak_bytes = std::max(m.model_state_peak_bytes, c[3]);
    m.unsharded_param_peak_bytes = std::max(m.unsharded_param_peak_bytes, c[4]);
    m.unsharded_grad_peak_bytes = std::max(m.unsharded_grad_peak_bytes, c[5]);
    m.comm_staging_peak_bytes = std::max(m.comm_staging_peak_bytes, c[6]);
  }
  m.loss /= global_tokens;
  m.peak_mem_bytes = max_of(m.peak_mem_per_rank);
  m.tokens_per_s = global_tokens / m.step_time_s;
  ++step_;
  return m;
}

void Trainer::for_each_full_param(
    const std::function<void(const Parameter&, const Tensor&)>& fn) {
  if (fsdp_) {
    fsdp_->for_each_full_param(fn);
    return;
  }
  for (Parameter* p : model_->parameters()) fn(*p, p->value());
}

void Trainer::save(const std::string& path) {
  std::unique_ptr<SafetensorsWriter> writer;
  if (rank() == 0) {
    std::vector<SafetensorsSpec> specs;
    for (Parameter* p : model_->parameters()) specs.push_back({p->name(), DType::f32, p->shape()});
    writer = std::make_unique<SafetensorsWriter>(path, std::move(specs));
  }
  for_each_full_param([&](const Parameter& p, const Tensor& value) {
    if (writer) writer->write(p.name(), value);
  });
  if (writer) writer->finish();
}

std::string Trainer::sample(int64_t bytes, uint64_t seed) {
  MT_CHECK_EQ(config_.model.vocab, 256, "sampling text needs a byte-level model (vocab 256)");
  std::unique_ptr<GPT2> whole;
  if (rank() == 0) whole = std::make_unique<GPT2>(config_.model);
  for_each_full_param([&](const Parameter& p, const Tensor& value) {
    if (whole) whole->parameter(p.name()).value().copy_from(value);
  });
  if (!whole) return "";
  SampleOptions options;
  options.count = bytes;
  options.temperature = 0.8f;
  options.seed = seed;
  return sample_text(*whole, "\n", options);
}

}  // namespace meshtrain

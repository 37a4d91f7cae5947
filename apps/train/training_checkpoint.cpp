#include "apps/train/training_checkpoint.h"

#include <filesystem>
#include <map>
#include <optional>

#include "checkpoint/checkpoint_directory.h"
#include "core/error.h"
#include "models/rng.h"
#include "parallel/grad_norm.h"
#include "parallel/slot_pieces.h"

namespace meshtrain {

namespace {

std::string hex(uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = digits[value & 15];
  return out;
}

// Field `key` of `object` in `metadata`, or InvalidArgument naming the checkpoint.
const nlohmann::json& field(const nlohmann::json& object, const std::string& key,
                            const std::string& checkpoint) {
  MT_CHECK(object.is_object() && object.contains(key), "checkpoint '", checkpoint,
           "' was not written by a training run: its metadata has no '", key, "'");
  return object.at(key);
}

int64_t integer_field(const nlohmann::json& object, const std::string& key,
                      const std::string& checkpoint) {
  const nlohmann::json& value = field(object, key, checkpoint);
  MT_CHECK(value.is_number_integer(), "checkpoint '", checkpoint, "': its metadata's '", key,
           "' is ", value.dump(), "; expected an integer");
  return value.get<int64_t>();
}

std::string text_field(const nlohmann::json& object, const std::string& key,
                       const std::string& checkpoint) {
  const nlohmann::json& value = field(object, key, checkpoint);
  MT_CHECK(value.is_string(), "checkpoint '", checkpoint, "': its metadata's '", key, "' is ",
           value.dump(), "; expected a string");
  return value.get<std::string>();
}

std::map<std::string, const Parameter*> by_name(Model& model) {
  std::map<std::string, const Parameter*> out;
  for (const Parameter* p : model.parameters()) out[p->name()] = p;
  return out;
}

const Parameter& parameter_of(const OptimizerSlot& slot,
                              const std::map<std::string, const Parameter*>& params) {
  const auto it = params.find(slot.name);
  MT_CHECK(it != params.end(), "slot '", slot.name, "' is no parameter of the model");
  return *it->second;
}

}  // namespace

nlohmann::json model_metadata(const GPT2Config& m) {
  return {{"vocab", m.vocab}, {"ctx", m.ctx}, {"dim", m.dim}, {"layers", m.layers},
          {"heads", m.heads}};
}

std::string find_checkpoint(const std::string& path, std::string_view flag) {
  if (std::filesystem::exists(std::filesystem::path(path) / "index.json")) return path;
  MT_CHECK(std::filesystem::is_directory(path), flag, " '", path,
           "': expected a checkpoint folder (written with --checkpoint-dir)");
  const std::optional<std::string> latest = latest_checkpoint(path);
  MT_CHECK(latest.has_value(), flag, " '", path, "': the folder holds no complete checkpoint");
  return *latest;
}

bool is_checkpoint_path(const std::string& path) { return std::filesystem::is_directory(path); }

void check_no_later_checkpoints(const std::string& dir, int64_t step) {
  if (dir.empty() || !std::filesystem::is_directory(dir)) return;
  const auto held = complete_checkpoints(dir);
  MT_CHECK(held.empty() || held.back().first <= step, "--checkpoint-dir '", dir, "' already holds ",
           held.back().second, ", past step ", step,
           " where this run starts: it belongs to another run, or to the later steps of the one "
           "this run restarts, and would be taken for this run's newest; move it away or write "
           "to another folder");
}

GPT2Config checkpoint_model(const CheckpointReader& reader) {
  const nlohmann::json& model = field(reader.metadata(), "model", reader.path());
  GPT2Config config;
  config.vocab = integer_field(model, "vocab", reader.path());
  config.ctx = integer_field(model, "ctx", reader.path());
  config.dim = integer_field(model, "dim", reader.path());
  config.layers = integer_field(model, "layers", reader.path());
  config.heads = integer_field(model, "heads", reader.path());
  config.validate();
  return config;
}

DataFingerprint fingerprint_tokens(const std::vector<uint16_t>& tokens) {
  // The tokens' bytes as the token file stores them (little-endian uint16).
  const std::string_view bytes(reinterpret_cast<const char*>(tokens.data()),
                               tokens.size() * sizeof(uint16_t));
  return {static_cast<int64_t>(tokens.size()), fnv1a64(bytes)};
}

std::string exp_avg_name(const std::string& param) { return "optimizer.exp_avg." + param; }
std::string exp_avg_sq_name(const std::string& param) { return "optimizer.exp_avg_sq." + param; }

nlohmann::json run_metadata(const TrainConfig& config, const MeshLayout& mesh,
                            const DataFingerprint& data, int64_t step, int64_t optimizer_steps) {
  return {{"step", step},
          {"model", model_metadata(config.model)},
          {"batch", config.batch},
          {"seq", config.seq},
          {"grad_accum", config.grad_accum},
          {"data", {{"path", config.data_path}, {"tokens", data.tokens}, {"fnv1a64", hex(data.hash)}}},
          {"seed", config.seed},
          {"lr", {{"lr", config.lr.lr}, {"warmup_steps", config.lr.warmup_steps},
                  {"decay_steps", config.lr.decay_steps}, {"min_lr", config.lr.min_lr}}},
          {"weight_decay", config.weight_decay},
          {"clip", config.clip},
          {"optimizer", {{"name", "adamw"}, {"steps", optimizer_steps}}},
          {"mesh", mesh.to_string()},
          {"world", config.world}};
}

void check_resumable(const nlohmann::json& metadata, const TrainConfig& config,
                     const DataFingerprint& data, const std::string& checkpoint) {
  const nlohmann::json& model = field(metadata, "model", checkpoint);
  const nlohmann::json wanted = model_metadata(config.model);
  for (const auto& [key, value] : wanted.items())
    MT_CHECK(field(model, key, checkpoint) == value, "--resume ", checkpoint,
             ": the checkpoint's model has ", key, " ", field(model, key, checkpoint).dump(),
             ", this run's has ", key, " ", value.dump(), "; resume with the same model");
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"batch", config.batch},
                                   {"seq", config.seq}})
    MT_CHECK(integer_field(metadata, key, checkpoint) == value, "--resume ", checkpoint,
             ": the checkpoint was trained with --", key, " ",
             field(metadata, key, checkpoint).dump(), ", this run asks for ", value,
             "; the batch contract (global batch and sequence length) must stay the same");
  const nlohmann::json& stored = field(metadata, "data", checkpoint);
  const int64_t tokens = integer_field(stored, "tokens", checkpoint);
  const std::string hash = text_field(stored, "fnv1a64", checkpoint);
  MT_CHECK(tokens == data.tokens && hash == hex(data.hash), "--resume ", checkpoint,
           ": the data differs: the checkpoint was trained on ", tokens, " tokens (FNV-1a ", hash,
           ", from '", text_field(stored, "path", checkpoint), "'), --data '", config.data_path,
           "' holds ", data.tokens, " tokens (FNV-1a ", hex(data.hash), ")");
}

std::vector<StoredTensor> stored_training_state(TrainableState& state, AdamW& optimizer,
                                                const DeviceMesh& mesh, Model& model) {
  const auto params = by_name(model);
  std::vector<StoredTensor> out;
  for (const OptimizerSlot& slot : state.held_slots()) {
    if (!owns_slot(slot, mesh)) continue;
    const Parameter& p = parameter_of(slot, params);
    const SlotPieces where = slot_pieces(slot, p, mesh);
    out.push_back({slot.name, p.global_shape(), slot.param.view(0, where.local_shape), where.pieces});
  }
  const std::vector<OptimizerSlot> slots = state.optimizer_slots();
  optimizer.prepare_state(slots);  // zero moments before the first step
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!owns_slot(slots[i], mesh)) continue;
    const Parameter& p = parameter_of(slots[i], params);
    const SlotPieces where = slot_pieces(slots[i], p, mesh);
    out.push_back({exp_avg_name(slots[i].name), p.global_shape(),
                   optimizer.exp_avg(i).view(0, where.local_shape), where.pieces});
    out.push_back({exp_avg_sq_name(slots[i].name), p.global_shape(),
                   optimizer.exp_avg_sq(i).view(0, where.local_shape), where.pieces});
  }
  return out;
}

void restore_optimizer(CheckpointReader& reader, TrainableState& state, AdamW& optimizer,
                       const DeviceMesh& mesh, Model& model) {
  const nlohmann::json& stored = field(reader.metadata(), "optimizer", reader.path());
  optimizer.set_steps_taken(integer_field(stored, "steps", reader.path()));
  const auto params = by_name(model);
  const std::vector<OptimizerSlot> slots = state.optimizer_slots();
  optimizer.prepare_state(slots);
  for (size_t i = 0; i < slots.size(); ++i) {
    const Parameter& p = parameter_of(slots[i], params);
    const SlotPieces where = slot_pieces(slots[i], p, mesh);
    reader.read(exp_avg_name(slots[i].name), p.global_shape(),
                optimizer.exp_avg(i).view(0, where.local_shape), where.pieces);
    reader.read(exp_avg_sq_name(slots[i].name), p.global_shape(),
                optimizer.exp_avg_sq(i).view(0, where.local_shape), where.pieces);
  }
}

}  // namespace meshtrain

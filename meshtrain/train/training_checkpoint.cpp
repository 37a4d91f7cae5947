#include "meshtrain/train/training_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <span>

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/json_fields.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/rng.h"
#include "meshtrain/parallel/grad_norm.h"
#include "meshtrain/parallel/slot_pieces.h"

namespace meshtrain {

namespace {

std::string hex(uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[static_cast<size_t>(i)] = digits[value & 15];
  return out;
}

// The fields of a training run's metadata in `checkpoint`, with errors that name it.
JsonFields metadata_fields(const std::string& checkpoint) {
  return JsonFields(
      detail::concat("checkpoint '", checkpoint, "' (the metadata of a training run)"));
}

int64_t count_field(const JsonFields& fields, const nlohmann::json& object, const char* key) {
  return static_cast<int64_t>(fields.unsigned_field(object, key));
}

// A model record's options as text: numbers as they print (checkpoints before the registry wrote
// GPT-2's sizes as numbers), booleans as true or false.
TextOptions record_options(const nlohmann::json& record) {
  TextOptions out;
  for (const auto& [key, value] : record.items()) {
    if (key == "family") continue;
    out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return out;
}

std::map<std::string, const Parameter*> by_name(Model& model) {
  std::map<std::string, const Parameter*> out;
  for (const Parameter* p : model.parameters()) out[p->name()] = p;
  return out;
}

const Parameter& parameter_of(const OptimizerSlot& slot,
                              const std::map<std::string, const Parameter*>& params) {
  const auto it = params.find(slot.name);
  MT_ASSERT(it != params.end(), "slot '", slot.name, "' is no parameter of the model");
  return *it->second;
}

}  // namespace

nlohmann::json model_metadata(const ModelSpec& model) {
  nlohmann::json record = model.options();
  record["family"] = model.family();
  return record;
}

std::string find_checkpoint(const std::string& path, std::string_view flag) {
  if (std::filesystem::exists(std::filesystem::path(path) / "index.json")) return path;
  MT_CHECK(std::filesystem::is_directory(path), flag, " '", path,
           "': expected a checkpoint folder (written with --checkpoint-dir)");
  const std::optional<std::string> latest = latest_checkpoint(path);
  MT_CHECK(latest.has_value(), flag, " '", path, "': the folder holds no complete checkpoint");
  return *latest;
}

bool is_checkpoint_path(const std::string& path) {
  return std::filesystem::is_directory(path) && !is_hf_folder(path);
}

void check_no_later_checkpoints(const std::string& dir, int64_t step) {
  if (dir.empty() || !std::filesystem::is_directory(dir)) return;
  const auto held = complete_checkpoints(dir);
  MT_CHECK(held.empty() || held.back().first <= step, "--checkpoint-dir '", dir, "' already holds ",
           held.back().second, ", past step ", step,
           " where this run starts: it belongs to another run, or to the later steps of the one "
           "this run restarts, and would be taken for this run's newest; move it away or write "
           "to another folder");
}

ModelSpecPtr checkpoint_model(const CheckpointReader& reader, const ModelRegistry& registry) {
  const nlohmann::json& record =
      metadata_fields(reader.path()).object_field(reader.metadata(), "model");
  const auto family = record.find("family");
  MT_CHECK(family == record.end() || family->is_string(), "checkpoint '", reader.path(),
           "': its model's family is ", family->dump(), ", not a name");
  TextOptions options = record_options(record);
  try {
    return registry.create(family == record.end() ? "gpt2" : family->get<std::string>(), options);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("checkpoint '", reader.path(), "': ", e.what()));
  }
}

DataFingerprint fingerprint_tokens(const TokenFile& data) {
  // The bytes of the file's own width (uint16 for gpt-2), so that a gpt-2 file keeps the
  // fingerprint its checkpoints recorded when tokens were uint16 in memory too; a chunk at a time,
  // so that no copy of the whole data is made.
  constexpr size_t kChunk = size_t{1} << 20;
  const std::span<const Token> tokens(data.tokens);
  uint64_t hash = kFnv1a64Basis;
  for (size_t at = 0; at < tokens.size(); at += kChunk)
    hash = fnv1a64(
        token_bytes(tokens.subspan(at, std::min(kChunk, tokens.size() - at)), data.format), hash);
  return {static_cast<int64_t>(tokens.size()), hash};
}

std::string exp_avg_name(const std::string& param) { return "optimizer.exp_avg." + param; }
std::string exp_avg_sq_name(const std::string& param) { return "optimizer.exp_avg_sq." + param; }

nlohmann::json run_metadata(const TrainConfig& config, const MeshLayout& mesh,
                            const DataFingerprint& data, int64_t step, int64_t optimizer_steps) {
  return {{"step", step},
          {"model", model_metadata(*config.model)},
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
  const JsonFields fields = metadata_fields(checkpoint);
  const nlohmann::json& model = fields.object_field(metadata, "model");
  const std::string family = model.value("family", "gpt2");
  MT_CHECK(family == config.model->family(), "--resume ", checkpoint, ": the checkpoint's model is ",
           family, "'s, this run's ", config.model->family(), "'s; resume with the same model");
  const TextOptions stored_model = record_options(model);
  for (const auto& [key, value] : config.model->options()) {
    const auto held = stored_model.find(key);
    MT_CHECK(held != stored_model.end(), "--resume ", checkpoint, ": the checkpoint's model has no ", key,
             ", this run's has ", key, " ", value, "; resume with the same model");
    MT_CHECK(held->second == value, "--resume ", checkpoint, ": the checkpoint's model has ", key,
             " ", held->second, ", this run's has ", key, " ", value,
             "; resume with the same model");
  }
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"batch", config.batch},
                                   {"seq", config.seq}})
    MT_CHECK(count_field(fields, metadata, key) == value, "--resume ", checkpoint,
             ": the checkpoint was trained with --", key, " ", count_field(fields, metadata, key),
             ", this run asks for ", value,
             "; the batch contract (global batch and sequence length) must stay the same");
  const nlohmann::json& stored = fields.object_field(metadata, "data");
  const int64_t tokens = count_field(fields, stored, "tokens");
  const std::string hash = fields.string_field(stored, "fnv1a64");
  // Holding out validation's tenth of --data changes what training reads: say so either way.
  std::string split;
  if (config.holds_out_validation())
    split = " for training, its last tenth held out for validation (--val-every without "
            "--val-data): resume with the validation settings the checkpoint was trained with";
  else if (tokens == data.tokens - data.tokens / kValHeldOutDivisor)
    split = "; the checkpoint's run held out the file's last tenth for validation (--val-every "
            "without --val-data): resume with the same validation settings";
  MT_CHECK(tokens == data.tokens && hash == hex(data.hash), "--resume ", checkpoint,
           ": the data differs: the checkpoint was trained on ", tokens, " tokens (FNV-1a ", hash,
           ", from '", fields.string_field(stored, "path"), "'), --data '", config.data_path,
           "' holds ", data.tokens, " tokens (FNV-1a ", hex(data.hash), ")", split);
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
  const JsonFields fields = metadata_fields(reader.path());
  const nlohmann::json& stored = fields.object_field(reader.metadata(), "optimizer");
  optimizer.set_steps_taken(count_field(fields, stored, "steps"));
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

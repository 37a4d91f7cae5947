#include "meshtrain/checkpoint/convert.h"

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/checkpoint_writer.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/checkpoint/shard_writer.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/safetensors_set.h"

namespace meshtrain {

void checkpoint_to_safetensors(const std::string& checkpoint, const std::string& file,
                               const std::map<std::string, std::string>& metadata,
                               std::string_view skip_prefix) {
  check_output_is_not_input(file, "the output", checkpoint, "the checkpoint");
  CheckpointReader reader(checkpoint);
  std::vector<SafetensorsSpec> specs;
  for (const std::string& name : reader.names())
    if (skip_prefix.empty() || !name.starts_with(skip_prefix))
      specs.push_back({name, DType::f32, reader.global_shape(name)});
  AtomicFile out(file);  // a failed export leaves an existing `file` as it was
  std::map<std::string, std::string> file_metadata = metadata;
  file_metadata["format"] = "pt";
  SafetensorsWriter writer(out.partial_path(), specs, file_metadata);
  for (const SafetensorsSpec& spec : specs) {
    const Tensor value = Tensor::empty(spec.shape);
    reader.read_box(spec.name, {Shape(spec.shape.size(), 0), spec.shape}, value);
    writer.write(spec.name, value);
  }
  writer.finish();
  out.commit();
}

std::string safetensors_to_checkpoint(const std::string& file, const std::string& dir, int64_t step,
                                      const nlohmann::json& metadata, const KeyNames& stored_name) {
  MT_CHECK(step >= 0, "checkpoint steps are non-negative, got ", step);
  SafetensorsSet source(file);
  const uint64_t chunk_bytes = CheckpointSaveOptions{}.chunk_bytes;
  std::vector<std::pair<const SafetensorsEntry*, std::string>> kept;  // entry, checkpoint name
  IndexedTensors plan;
  for (const SafetensorsEntry& e : source.entries()) {
    std::optional<std::string> name = stored_name ? stored_name(e.name) : e.name;
    if (!name) continue;
    MT_CHECK(!plan.count(*name), "'", file, "': two keys are stored as '", *name, "'");
    IndexedTensor& tensor = plan[*name];
    tensor.shape = e.shape;
    if (shape_numel(e.shape) > 0)
      tensor.slices.push_back(StoredSlice{"", "", {Shape(e.shape.size(), 0), e.shape}, {}});
    kept.emplace_back(&e, std::move(*name));
  }
  // The steps of save_checkpoint with one rank: no communicator, nothing to agree on.
  const std::string partial = prepare_partial_directory(dir, step);
  try {
    ShardWriter writer(partial, shard_file_name(0), std::move(plan), chunk_bytes);
    for (const auto& [e, name] : kept) {
      if (shape_numel(e->shape) == 0) continue;
      const Tensor value = Tensor::empty(e->shape);
      source.read(e->name, value);
      writer.write(name, {Shape(e->shape.size(), 0), e->shape}, value);
    }
    const CheckpointIndex index = build_index(step, chunk_bytes, metadata, {writer.finish()});
    write_index_file(partial, index);
    write_complete_marker(partial, step);
    return publish_partial_directory(dir, step);
  } catch (...) {
    discard_partial_directory(dir, step);
    throw;
  }
}

}  // namespace meshtrain

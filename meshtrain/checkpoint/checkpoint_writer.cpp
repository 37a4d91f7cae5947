#include "meshtrain/checkpoint/checkpoint_writer.h"

#include <filesystem>
#include <optional>
#include <set>

#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/shard_writer.h"
#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_copy.h"

namespace meshtrain {

namespace {

// Runs `step` unless an earlier one failed, keeping the failure's message for the others.
void attempt(std::optional<std::string>& error, const std::function<void()>& step) {
  if (error) return;
  try {
    step();
  } catch (const std::exception& e) {
    error = e.what();
  }
}

// Collective: every rank's report, in rank order, when every rank succeeded; otherwise IoError on
// every rank naming the first rank that failed. No rank is left waiting: each one joins, whatever
// happened to it.
std::vector<nlohmann::json> agree(Communicator& world, const std::optional<std::string>& error,
                                  const nlohmann::json& report = nullptr) {
  const nlohmann::json mine =
      error ? nlohmann::json{{"error", *error}} : nlohmann::json{{"report", report}};
  const auto texts = all_gather_strings(
      world, mine.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  std::vector<nlohmann::json> reports;
  std::optional<std::string> failure;
  int failed = 0;
  for (size_t r = 0; r < texts.size(); ++r) {
    const nlohmann::json theirs = nlohmann::json::parse(texts[r]);
    if (theirs.contains("error") && failed++ == 0)
      failure = detail::concat("checkpoint save failed on rank ", r, ": ",
                               theirs["error"].get<std::string>());
    reports.push_back(theirs.value("report", nlohmann::json()));
  }
  if (failure) {
    if (failed > 1)
      *failure += detail::concat(" (", failed - 1, failed == 2 ? " other rank" : " other ranks",
                                 " failed too)");
    throw IoError(*failure);
  }
  return reports;
}

void check_stored(const StoredTensor& t) {
  const auto where = [&] { return detail::concat("checkpoint tensor '", t.name, "': "); };
  MT_CHECK(!t.name.empty(), "checkpoint tensors need a name");
  MT_CHECK(t.local.defined() && t.local.dtype() == DType::f32 &&
               t.local.ndim() == static_cast<int>(t.global_shape.size()),
           where(), "the local tensor must be f32 of the global rank ", t.global_shape.size(),
           ", got ", t.local.defined() ? t.local.describe() : "an undefined tensor");
  int64_t covered = 0;
  for (const LocalPiece& p : t.pieces) {
    bool inside = p.global.offset.size() == t.global_shape.size() &&
                  p.global.shape.size() == t.global_shape.size() &&
                  p.local_offset.size() == t.global_shape.size();
    for (size_t d = 0; inside && d < t.global_shape.size(); ++d)
      inside = p.global.offset[d] >= 0 && p.global.shape[d] >= 0 &&
               p.global.offset[d] + p.global.shape[d] <= t.global_shape[d] &&
               p.local_offset[d] >= 0 && p.local_offset[d] + p.global.shape[d] <= t.local.dim(d);
    MT_CHECK(inside, where(), "the piece at global offset ", shape_string(p.global.offset),
             " of shape ", shape_string(p.global.shape), " (local offset ",
             shape_string(p.local_offset), ") leaves the global ", shape_string(t.global_shape),
             " or the local ", t.local.describe());
    covered += shape_numel(p.global.shape);
  }
  MT_CHECK(covered == t.local.numel(), where(), "its pieces hold ", covered,
           " elements, its local tensor ", t.local.describe(), " holds ", t.local.numel());
}

// Writes this rank's shard: one slice per non-empty piece.
ShardContents write_shard(const std::string& partial, int rank,
                          const std::vector<StoredTensor>& mine, uint64_t chunk_bytes) {
  IndexedTensors plan;
  for (const StoredTensor& t : mine) {
    check_stored(t);
    auto [it, added] = plan.try_emplace(t.name, IndexedTensor{t.global_shape, {}});
    MT_CHECK(added, "checkpoint tensor '", t.name, "' is given twice on this rank");
    for (const LocalPiece& p : t.pieces)
      if (shape_numel(p.global.shape) > 0)
        it->second.slices.push_back(StoredSlice{"", "", p.global, {}});
  }
  ShardWriter writer(partial, shard_file_name(rank), std::move(plan), chunk_bytes);
  for (const StoredTensor& t : mine) {
    const Tensor host = t.local.on(Device::cpu());
    for (const LocalPiece& p : t.pieces) {
      if (shape_numel(p.global.shape) == 0) continue;
      if (p.global.shape == host.shape()) {
        writer.write(t.name, p.global, host);
        continue;
      }
      const Tensor box = Tensor::empty(p.global.shape);
      copy_box(box, Shape(p.global.shape.size(), 0), host, p.local_offset, p.global.shape);
      writer.write(t.name, p.global, box);
    }
  }
  return writer.finish();
}

}  // namespace

std::string save_checkpoint(Communicator& world, const std::string& dir, int64_t step,
                            const std::vector<StoredTensor>& mine, const nlohmann::json& metadata,
                            const CheckpointSaveOptions& options) {
  const bool root = world.rank() == 0;
  const std::string partial = partial_directory_path(dir, step);
  const auto notify = [&](const std::string& path) {
    if (options.after_file) options.after_file(path);
  };
  std::optional<std::string> error;
  attempt(error, [&] {
    MT_CHECK(step >= 0, "checkpoint steps are non-negative, got ", step);
    MT_CHECK(options.keep >= 0, "CheckpointSaveOptions::keep counts checkpoints (0: all), got ",
             options.keep);
    MT_CHECK(options.chunk_bytes > 0 && options.chunk_bytes <= kMaxCheckpointChunkBytes,
             "CheckpointSaveOptions::chunk_bytes must be in [1, 1 GiB], got ", options.chunk_bytes);
  });
  if (root) attempt(error, [&] { prepare_partial_directory(dir, step); });
  agree(world, error);  // the directory exists for everyone

  ShardContents contents;
  attempt(error, [&] { contents = write_shard(partial, world.rank(), mine, options.chunk_bytes); });
  if (!error) notify((std::filesystem::path(partial) / contents.file).string());
  std::vector<nlohmann::json> reports;
  try {
    reports = agree(world, error, shard_contents_to_json(contents));
  } catch (const IoError&) {
    if (root) discard_partial_directory(dir, step);
    throw;
  }

  if (root) {
    std::string written;
    attempt(error, [&] {
      std::vector<ShardContents> shards;
      for (const nlohmann::json& report : reports)
        shards.push_back(shard_contents_from_json(report));
      written = write_index_file(partial, build_index(step, options.chunk_bytes, metadata, shards));
    });
    if (!error) notify(written);
    attempt(error, [&] { written = write_complete_marker(partial, step); });
    if (!error) notify(written);
    attempt(error, [&] { publish_partial_directory(dir, step); });
    attempt(error, [&] {
      try {
        prune_checkpoints(dir, options.keep);
      } catch (const IoError& e) {
        throw IoError(
            detail::concat(step_directory_name(step),
                           " was published, but pruning older checkpoints failed: ", e.what()));
      }
    });
    if (error) discard_partial_directory(dir, step);
  }
  agree(world, error);  // everyone returns, or throws, with rank 0
  return (std::filesystem::path(dir) / step_directory_name(step)).string();
}

}  // namespace meshtrain

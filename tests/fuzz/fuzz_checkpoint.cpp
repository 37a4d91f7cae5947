// Checkpoint indexes: an index.json given over the real shards of a small checkpoint (two ranks'
// slices of a [4, 3] tensor, one rank's [5] tensor, written once per process), then every tensor
// it accepts read back whole. The path of --resume, --init DIR and convert.
#include <filesystem>

#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/checkpoint_writer.h"
#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace meshtrain;
namespace fs = std::filesystem;

// The checkpoint's step folder, made on first use and removed at exit.
const fs::path& checkpoint_folder() {
  struct Folder {
    fs::path root;
    fs::path step;
    ~Folder() { fs::remove_all(root); }
  };
  static const Folder folder = [] {
    Folder f;
    f.root = fuzz::scratch_path("checkpoint");
    spawn_ranks(2, [&](RankContext& ctx) {
      std::vector<float> rows(6);
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(ctx.rank * 6 + i);
      std::vector<StoredTensor> mine = {
          {"w", {4, 3}, Tensor::from_vector(rows, {2, 3}), {{{{2 * ctx.rank, 0}, {2, 3}}, {0, 0}}}}};
      if (ctx.rank == 0)
        mine.push_back({"b", {5}, Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {5}),
                        {{{{0}, {5}}, {0}}}});
      CheckpointSaveOptions options;
      options.chunk_bytes = 8;  // several CRC chunks per slice
      const std::string step =
          save_checkpoint(ctx.world, f.root.string(), 3, mine, {{"run", "fuzz"}}, options);
      if (ctx.rank == 0) f.step = step;
    });
    return f;
  }();
  return folder.step;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& folder = checkpoint_folder();
  std::ofstream(folder / "index.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return fuzz::accept_or_refuse([&] {
    CheckpointReader reader(folder.string());
    for (const std::string& name : reader.names()) {
      const Shape& shape = reader.global_shape(name);
      if (shape_numel(shape) > (int64_t{1} << 20)) continue;  // keeps each run quick
      reader.read_box(name, {Shape(shape.size(), 0), shape}, Tensor::empty(shape));
    }
  });
}

// Sharded Hugging Face weights: a model.safetensors.index.json given beside two real shards (made
// once per process: "a" and "c" in the first, "b" in the second), then every tensor it accepts read
// back whole. The path of --init FOLDER and convert for a sharded model.
#include <filesystem>

#include "meshtrain/models/safetensors_set.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace meshtrain;
namespace fs = std::filesystem;

// The shards' folder, made on first use and removed at exit.
const fs::path& shard_folder() {
  struct Folder {
    fs::path path;
    ~Folder() { fs::remove_all(path); }
  };
  static const Folder folder = [] {
    Folder f{fuzz::scratch_path("safetensors_index")};
    fs::create_directories(f.path);
    SafetensorsWriter first((f.path / "model-00001-of-00002.safetensors").string(),
                            {{"a", DType::f32, {2, 2}}, {"c", DType::bf16, {3}}},
                            {{"format", "pt"}});
    first.write("a", Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
    first.write("c", Tensor::from_vector(std::vector<float>{5, 6, 7}, {3}));
    first.finish();
    SafetensorsWriter second((f.path / "model-00002-of-00002.safetensors").string(),
                             {{"b", DType::f32, {0}}}, {{"format", "pt"}});
    second.write("b", Tensor::empty({0}));
    second.finish();
    return f;
  }();
  return folder.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path index = shard_folder() / "model.safetensors.index.json";
  std::ofstream(index, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return fuzz::accept_or_refuse([&] {
    SafetensorsSet weights(index.string());
    for (const SafetensorsEntry& entry : weights.entries())
      weights.read(entry.name, Tensor::empty(entry.shape, DType::f32));
  });
}

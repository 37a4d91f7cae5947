// Transformers' config.json as --init FOLDER and convert read it: beside a GPT-2 and a Llama
// model.safetensors (made once per process), each read into its family's model.
#include <filesystem>

#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/hf_config_path.h"
#include "meshtrain/models/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace meshtrain;
namespace fs = std::filesystem;

// A model.safetensors of zeros holding `tensors`, in `folder`.
void write_weights(const fs::path& folder, const std::vector<SafetensorsSpec>& tensors) {
  fs::create_directories(folder);
  SafetensorsWriter writer((folder / "model.safetensors").string(), tensors, {{"format", "pt"}});
  for (const SafetensorsSpec& tensor : tensors)
    writer.write(tensor.name, Tensor::zeros(tensor.shape));
  writer.finish();
}

// The two model folders, made on first use and removed at exit: the tensors that tell each family
// and the shapes it reads from them (V=64, T=16, d=32, L=2), as transformers names them.
const std::vector<fs::path>& model_folders() {
  struct Folders {
    fs::path root;
    std::vector<fs::path> models;
    ~Folders() { fs::remove_all(root); }
  };
  static const Folders folders = [] {
    Folders f{fuzz::scratch_path("hf_config"), {}};
    f.models = {f.root / "gpt2", f.root / "llama"};
    write_weights(f.models[0], {{"transformer.wte.weight", DType::f32, {64, 32}},
                                {"transformer.wpe.weight", DType::f32, {16, 32}},
                                {"transformer.h.0.ln_1.weight", DType::f32, {32}},
                                {"transformer.h.1.ln_1.weight", DType::f32, {32}}});
    write_weights(f.models[1], {{"model.embed_tokens.weight", DType::f32, {64, 32}},
                                {"model.norm.weight", DType::f32, {32}}});
    return f;
  }();
  return folders.models;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ModelRegistry models = builtin_models();
  for (const fs::path& folder : model_folders()) {
    std::ofstream(folder / "config.json", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    fuzz::accept_or_refuse([&] { models.from_safetensors(hf_weights_path(folder.string())); });
  }
  return 0;
}

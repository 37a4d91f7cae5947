// safetensors files: the header (length, JSON, dtypes, shapes, offsets), then every tensor it
// accepts read back whole, as f32, and as stored bytes.
#include "meshtrain/models/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace meshtrain;
  const std::string& path = fuzz::as_file(data, size, "model.safetensors");
  return fuzz::accept_or_refuse([&] {
    SafetensorsReader reader(path);
    for (const SafetensorsEntry& entry : reader.entries()) {
      // The file holds the data the header declares, so a large tensor is a large input: the
      // cap only keeps each run quick.
      if (entry.end - entry.begin > (uint64_t{1} << 20)) continue;
      std::vector<uint8_t> bytes(entry.end - entry.begin);
      reader.read_bytes(entry.name, 0, bytes.size(), bytes.data());
      if (entry.dtype == "F32" || entry.dtype == "BF16")
        reader.read(entry.name, Tensor::empty(entry.shape, DType::f32));
    }
  });
}

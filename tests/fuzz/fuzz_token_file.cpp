// Token files (llm.c's format): the header's magic, version and count against the file's size.
#include "meshtrain/models/token_file.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = meshtrain::fuzz::as_file(data, size, "tokens.bin");
  return meshtrain::fuzz::accept_or_refuse([&] { meshtrain::read_token_file(path); });
}

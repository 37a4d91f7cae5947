// What a fuzz target may do with an input: parse it through a file, as meshtrain reads its inputs,
// and either accept it or refuse it with one of meshtrain's errors. Any other exception (a
// library's own, std::bad_alloc from a size taken on trust, std::length_error) escapes, ends the
// program through std::terminate and so fails the run, as do the sanitizers' findings.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "meshtrain/core/error.h"

namespace meshtrain::fuzz {

// A path for this process's scratch file or folder `name`: in memory (/dev/shm) where there is
// one, since ext4 flushes a file rewritten in place on every close.
inline std::filesystem::path scratch_path(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                        ? std::filesystem::path("/dev/shm")
                                        : std::filesystem::temp_directory_path();
  return dir / ("meshtrain-fuzz-" + std::to_string(::getpid()) + "-" + name);
}

// `data` written to the scratch file `name` (one per target), removed at exit.
inline const std::string& as_file(const uint8_t* data, size_t size, const char* name) {
  struct TempFile {
    std::string path;
    ~TempFile() { std::remove(path.c_str()); }
  };
  static const TempFile file{scratch_path(name).string()};
  std::ofstream(file.path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file.path;
}

// Runs parse(); meshtrain's refusals are an answer, anything else escapes.
template <typename Parse>
int accept_or_refuse(Parse&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace meshtrain::fuzz

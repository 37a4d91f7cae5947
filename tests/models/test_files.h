// Scratch files for the models tests: one directory per test, removed by the destructor.
#pragma once

#include <filesystem>
#include <string>

namespace meshtrain::testing {

class ScratchDir {
 public:
  ScratchDir();  // named after the running test and the process id
  ~ScratchDir();
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace meshtrain::testing

#include "tests/models/test_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace meshtrain::testing {

ScratchDir::ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  path_ = std::filesystem::temp_directory_path() /
          ("meshtrain_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
           std::to_string(::getpid()));
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace meshtrain::testing

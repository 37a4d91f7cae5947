// The checkpoint folder's housekeeping: the lock that keeps a second run out of a folder in use.
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint_directory.h"
#include "core/error.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {
namespace {

TEST(CheckpointDirectoryLock, ASecondHolderIsRefusedNamingTheFirst) {
  ScratchDir dir;
  const std::string ckpt = dir.file("new/ckpt");
  {
    const CheckpointDirectoryLock first(ckpt);  // creates the folder
    expect_error<IoError>([&] { CheckpointDirectoryLock second(ckpt); },
                          "the checkpoint folder '" + ckpt + "' is in use by another run (pid " +
                              std::to_string(::getpid()) + " on ",
                          "holding '" + ckpt + "/.lock'); wait for it to end, or write to "
                                               "another folder");
  }
  const CheckpointDirectoryLock again(ckpt);  // released with the first
}

}  // namespace
}  // namespace meshtrain::testing

// Files that survive a crash once written: the data is flushed to the disk (fsync) before the
// caller moves on, and directories are synced so that created and renamed entries persist too.
// The checkpoint's atomic protocol (docs/checkpoint.md) rests on these.
#pragma once

#include <string>

namespace meshtrain {

// fsync of a written file, or of a directory (its entries: created, renamed, removed files).
// IoError naming the path and the system's reason.
void sync_file(const std::string& path);
void sync_directory(const std::string& path);

// Creates (or replaces) `path` holding `text`, and syncs it.
void write_file_synced(const std::string& path, const std::string& text);

// The whole of a small file (an index); IoError when it cannot be read.
std::string read_small_file(const std::string& path);

}  // namespace meshtrain

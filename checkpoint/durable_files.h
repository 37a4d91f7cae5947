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

// Creates the folder `path` and any missing parents, syncing each into its parent, so that a crash
// cannot lose the folder with what is later published in it. IoError naming the folder.
void create_directories_synced(const std::string& path);

// Creates (or replaces) `path` holding `text`, and syncs it.
void write_file_synced(const std::string& path, const std::string& text);

// A file that appears whole or not at all. Writes go to partial_path() (`path.partial`); commit()
// syncs it, renames it to `path` and syncs the folder. Destroyed uncommitted (a failed write), it
// removes the partial file, and `path` keeps what it held before.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& partial_path() const { return partial_; }
  void commit();

 private:
  std::string path_, partial_;
  bool committed_ = false;
};

// The whole of a small file (an index); IoError when it cannot be read.
std::string read_small_file(const std::string& path);

}  // namespace meshtrain

// Files that survive a crash once written: the data is flushed to the disk (fsync) before the
// caller moves on, and directories are synced so that created and renamed entries persist too.
// The checkpoint's atomic protocol (docs/checkpoint.md) rests on these.
#pragma once

#include <string>
#include <string_view>

namespace meshtrain {

// Outputs are checked before anything is written. `what` names the output (or input) in the
// message: a flag ("--save") or a role ("the token file").
// IoError unless `path` is absent or a regular file (a symlink to one counts): an output replaced
// by rename would put a regular file in place of a device (`--save /dev/null` as root would
// replace the system's /dev/null), and one written in place can block on a FIFO.
void check_regular_output(const std::string& path, std::string_view what);
// InvalidArgument when writing `output` would destroy `input`: it is the same file (through any
// link or spelling), or lies inside the folder `input`. An empty path checks nothing.
void check_output_is_not_input(const std::string& output, std::string_view output_what,
                               const std::string& input, std::string_view input_what);

// fsync of a written file, or of a directory (its entries: created, renamed, removed files).
// IoError naming the path and the system's reason.
void sync_file(const std::string& path);
void sync_directory(const std::string& path);

// Creates the folder `path` and any missing parents, syncing each into its parent, so that a crash
// cannot lose the folder with what is later published in it. IoError naming the folder.
void create_directories_synced(const std::string& path);

// Creates (or replaces) `path` holding `text`, and syncs it.
void write_file_synced(const std::string& path, const std::string& text);

// A file that appears whole or not at all. The constructor checks `path` (check_regular_output) and
// creates a fresh, empty partial_path() (`path.partial`) with O_EXCL|O_NOFOLLOW: a stale one, or a
// symlink planted there, is removed, never written through. Writes go to the partial file;
// commit() syncs it, renames it to `path` and syncs the folder. Destroyed uncommitted (a failed
// write), it removes the partial file, and `path` keeps what it held before.
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

// Writes `text` to `path` whole or not at all (AtomicFile).
void write_file_atomically(const std::string& path, const std::string& text);

// The whole of a small file (an index); IoError when it cannot be read.
std::string read_small_file(const std::string& path);

}  // namespace meshtrain

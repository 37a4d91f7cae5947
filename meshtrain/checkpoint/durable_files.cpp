#include "meshtrain/checkpoint/durable_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace fs = std::filesystem;

namespace {
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

void sync_path(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0)
    throw IoError(
        detail::concat("cannot open ", what, " '", path, "' to sync it: ", std::strerror(errno)));
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0)
    throw IoError(
        detail::concat("fsync of ", what, " '", path, "' failed: ", std::strerror(error)));
}
}  // namespace

void check_regular_output(const std::string& path, std::string_view what) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return;  // a new file
    throw IoError(detail::concat(what, " '", path, "': cannot stat it: ", std::strerror(errno)));
  }
  if (!S_ISREG(status.st_mode))
    throw IoError(detail::concat(what, " '", path, "' is ", file_kind(status.st_mode),
                                 "; expected a regular file to replace, or a new path"));
}

void check_output_is_not_input(const std::string& output, std::string_view output_what,
                               const std::string& input, std::string_view input_what) {
  if (output.empty() || input.empty()) return;
  std::error_code missing, out_error, in_error;
  const bool same_file = fs::equivalent(output, input, missing);  // false when either is missing
  const fs::path out = fs::weakly_canonical(output, out_error);
  const fs::path in = fs::weakly_canonical(input, in_error);
  const bool within = !out_error && !in_error &&
                      std::mismatch(in.begin(), in.end(), out.begin(), out.end()).first == in.end();
  MT_CHECK(!same_file && !within, output_what, " '", output, "' ",
           same_file || out == in ? "is " : "lies inside ", input_what, " '", input,
           "'; choose another path for ", output_what);
}

void sync_file(const std::string& path) { sync_path(path, O_RDONLY, "file"); }

void sync_directory(const std::string& path) {
  sync_path(path, O_RDONLY | O_DIRECTORY, "directory");
}

void create_directories_synced(const std::string& path) {
  if (path.empty() || std::filesystem::is_directory(path)) return;
  const std::filesystem::path folder(path);
  const std::string parent = folder.has_parent_path() ? folder.parent_path().string() : ".";
  create_directories_synced(parent);
  std::error_code error;
  std::filesystem::create_directory(folder, error);
  if (error)
    throw IoError(detail::concat("cannot create the folder '", path, "': ", error.message()));
  sync_directory(parent);
}

void write_file_synced(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) throw IoError(detail::concat("writing '", path, "' failed"));
  }
  sync_file(path);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {
  check_regular_output(path_, "the output");
  ::unlink(partial_.c_str());  // a stale one; a symlink is removed, not followed
  const int fd =
      ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    throw IoError(detail::concat("cannot create '", partial_, "': ", std::strerror(errno)));
  ::close(fd);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove(partial_, ignored);
}

void AtomicFile::commit() {
  sync_file(partial_);
  std::error_code error;
  std::filesystem::rename(partial_, path_, error);
  if (error)
    throw IoError(
        detail::concat("cannot rename '", partial_, "' to '", path_, "': ", error.message()));
  committed_ = true;
  const std::string folder = std::filesystem::path(path_).parent_path().string();
  sync_directory(folder.empty() ? "." : folder);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile file(path);
  write_file_synced(file.partial_path(), text);
  file.commit();
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot open '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(detail::concat("reading '", path, "' failed"));
  return text.str();
}

}  // namespace meshtrain

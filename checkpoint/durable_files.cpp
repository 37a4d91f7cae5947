#include "checkpoint/durable_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace meshtrain {

namespace {
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

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {}

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

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot open '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(detail::concat("reading '", path, "' failed"));
  return text.str();
}

}  // namespace meshtrain

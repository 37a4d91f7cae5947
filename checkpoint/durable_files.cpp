#include "checkpoint/durable_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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

void write_file_synced(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) throw IoError(detail::concat("writing '", path, "' failed"));
  }
  sync_file(path);
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

#include "meshtrain/checkpoint/checkpoint_directory.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {

namespace fs = std::filesystem;

namespace {

std::string numbered(const char* prefix, int64_t n, int digits, const char* suffix) {
  std::string number = std::to_string(n);
  if (number.size() < static_cast<size_t>(digits))
    number.insert(0, static_cast<size_t>(digits) - number.size(), '0');
  return prefix + number + suffix;
}

// The step a directory name stands for, when it is exactly step_directory_name(step).
std::optional<int64_t> step_of(const std::string& name) {
  if (!name.starts_with("step-")) return std::nullopt;
  const auto step = parse_integer<int64_t>(std::string_view(name).substr(5));
  if (!step || *step < 0 || step_directory_name(*step) != name) return std::nullopt;
  return step;
}

void remove_tree(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error)
    throw IoError(detail::concat("cannot remove '", path.string(), "': ", error.message()));
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw IoError(detail::concat("cannot rename '", from.string(), "' to '", to.string(),
                                 "': ", std::strerror(errno)));
}

struct StepFolder {
  int64_t step;
  fs::path path;
  bool complete;  // holds index.json and COMPLETE
};

// Every step-N folder in `dir`, oldest first.
std::vector<StepFolder> step_folders(const std::string& dir) {
  std::error_code error;
  fs::directory_iterator entries(dir, error);
  if (error)
    throw IoError(
        detail::concat("cannot list checkpoint directory '", dir, "': ", error.message()));
  std::vector<StepFolder> found;
  for (const fs::directory_entry& entry : entries) {
    const auto step = step_of(entry.path().filename().string());
    if (!step || !entry.is_directory(error)) continue;
    const bool complete = fs::is_regular_file(entry.path() / kCheckpointIndexFile, error) &&
                          fs::is_regular_file(entry.path() / kCheckpointCompleteMarker, error);
    found.push_back({*step, entry.path(), complete});
  }
  std::sort(found.begin(), found.end(),
            [](const StepFolder& a, const StepFolder& b) { return a.step < b.step; });
  return found;
}

bool is_pruned_name(const std::string& name) {
  return name.starts_with(".step-") && name.ends_with(".pruned");
}

}  // namespace

std::string step_directory_name(int64_t step) { return numbered("step-", step, 8, ""); }

std::string shard_file_name(int rank) { return numbered("rank-", rank, 5, ".safetensors"); }

std::string partial_directory_path(const std::string& dir, int64_t step) {
  return (fs::path(dir) / detail::concat(".", step_directory_name(step), ".partial")).string();
}

std::string prepare_partial_directory(const std::string& dir, int64_t step) {
  create_directories_synced(dir);
  std::error_code error;
  const fs::path partial = partial_directory_path(dir, step);
  remove_tree(partial);
  fs::create_directory(partial, error);
  if (error)
    throw IoError(detail::concat("cannot create '", partial.string(), "': ", error.message()));
  return partial.string();
}

void discard_partial_directory(const std::string& dir, int64_t step) noexcept {
  std::error_code ignored;
  fs::remove_all(partial_directory_path(dir, step), ignored);
}

std::string write_index_file(const std::string& partial, const CheckpointIndex& index) {
  const std::string path = (fs::path(partial) / kCheckpointIndexFile).string();
  const std::string text = index_to_json(index).dump(1) + "\n";
  // A checkpoint that could not be resumed must not be published.
  if (text.size() > kMaxCheckpointIndexBytes)
    throw IoError(detail::concat("the checkpoint index would be ", text.size(),
                                 " bytes, past the ", kMaxCheckpointIndexBytes >> 20,
                                 " MiB its readers accept (", index.tensors.size(),
                                 " tensors): fewer ranks or larger shards per rank"));
  write_file_synced(path, text);
  return path;
}

std::string write_complete_marker(const std::string& partial, int64_t step) {
  const std::string path = (fs::path(partial) / kCheckpointCompleteMarker).string();
  write_file_synced(path, "step " + std::to_string(step) + "\n");
  return path;
}

std::string publish_partial_directory(const std::string& dir, int64_t step) {
  const fs::path partial = partial_directory_path(dir, step);
  const fs::path final_path = fs::path(dir) / step_directory_name(step);
  sync_directory(partial.string());
  if (!fs::exists(final_path)) {
    rename_or_throw(partial, final_path);
  } else if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_path.c_str(),
                         RENAME_EXCHANGE) == 0) {
    remove_tree(partial);  // now the old step-N
  } else if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
    throw IoError(detail::concat("cannot exchange '", partial.string(), "' with '",
                                 final_path.string(), "': ", std::strerror(errno)));
  } else {
    // No atomic exchange here (NFS, for one): the old step-N steps aside first, so a crash in
    // between leaves the previous steps to load from, never a half-written one.
    const fs::path replaced =
        fs::path(dir) / detail::concat(".", step_directory_name(step), ".replaced");
    remove_tree(replaced);
    rename_or_throw(final_path, replaced);
    rename_or_throw(partial, final_path);
    remove_tree(replaced);
  }
  sync_directory(dir);
  return final_path.string();
}

std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const StepFolder& folder : step_folders(dir))
    if (folder.complete) found.emplace_back(folder.step, folder.path.string());
  return found;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  if (keep == 0) return;
  const std::vector<StepFolder> folders = step_folders(dir);
  for (const fs::directory_entry& entry : fs::directory_iterator(dir))  // a crash's leftovers
    if (is_pruned_name(entry.path().filename().string())) remove_tree(entry.path());
  int64_t kept = 0, oldest_kept = 0;
  for (auto it = folders.rbegin(); it != folders.rend() && kept < keep; ++it)
    if (it->complete) {
      ++kept;
      oldest_kept = it->step;
    }
  if (kept < keep) return;
  for (const StepFolder& folder : folders) {
    if (folder.step >= oldest_kept) break;
    const fs::path pruned =
        fs::path(dir) / detail::concat(".", step_directory_name(folder.step), ".pruned");
    rename_or_throw(folder.path, pruned);
    remove_tree(pruned);
  }
  sync_directory(dir);
}

CheckpointDirectoryLock::CheckpointDirectoryLock(const std::string& dir) {
  create_directories_synced(dir);
  const std::string path = (fs::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw IoError(detail::concat("cannot open the lock file '", path, "': ", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char holder[256] = {};
    const ssize_t got = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    std::string who(holder, static_cast<size_t>(std::max<ssize_t>(got, 0)));
    while (!who.empty() && who.back() == '\n') who.pop_back();
    if (error != EWOULDBLOCK)
      throw IoError(detail::concat("cannot lock '", path, "': ", std::strerror(error)));
    throw IoError(detail::concat("the checkpoint folder '", dir, "' is in use by another run (",
                                 who.empty() ? "one that has not yet written its pid" : who,
                                 ", holding '", path,
                                 "'); wait for it to end, or write to another folder"));
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "an unknown host");
  const std::string holder = detail::concat("pid ", ::getpid(), " on ", host, "\n");
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    const int error = errno;
    ::close(fd_);
    throw IoError(detail::concat("writing the lock file '", path, "' failed: ",
                                 std::strerror(error)));
  }
}

CheckpointDirectoryLock::~CheckpointDirectoryLock() { ::close(fd_); }

}  // namespace meshtrain

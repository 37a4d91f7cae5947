// The checkpoint directory and its atomic publication (docs/checkpoint.md):
//   dir/step-00000005/{rank-00000.safetensors, ..., index.json, COMPLETE}
// is written as dir/.step-00000005.partial and renamed into place once complete, so a reader
// never sees a half-written step. These steps need no communicator: save_checkpoint runs them
// on rank 0 between its collectives, and a one-rank conversion runs them directly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/checkpoint/checkpoint_index.h"

namespace meshtrain {

inline constexpr const char* kCheckpointIndexFile = "index.json";
inline constexpr const char* kCheckpointCompleteMarker = "COMPLETE";

std::string step_directory_name(int64_t step);  // "step-00000005"
std::string shard_file_name(int rank);          // "rank-00003.safetensors"

std::string partial_directory_path(const std::string& dir, int64_t step);  // dir/.step-N.partial
// Creates `dir` when missing and a fresh, empty partial directory for the step (a stale one from
// an interrupted save is removed); returns its path.
std::string prepare_partial_directory(const std::string& dir, int64_t step);
// Removes the partial directory of a failed save, if any; never throws (the save's own error is
// the one to report).
void discard_partial_directory(const std::string& dir, int64_t step) noexcept;
// Writes and syncs index.json, then the COMPLETE marker, in the partial directory; each returns
// the path it wrote.
std::string write_index_file(const std::string& partial, const CheckpointIndex& index);
std::string write_complete_marker(const std::string& partial, int64_t step);
// Syncs the partial directory, renames it to dir/step-N (atomically exchanging it with an
// existing step-N where the file system allows, then removing the old one) and syncs `dir`.
// Returns the published path.
std::string publish_partial_directory(const std::string& dir, int64_t step);

// The complete checkpoints in `dir` (step-N directories holding index.json and COMPLETE), oldest
// first. IoError when `dir` does not exist.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir);
// Removes the oldest complete checkpoints beyond the newest `keep` (0 keeps all), and every step
// folder older than those kept, complete or not. Each is first renamed to dir/.step-N.pruned, so
// a crash mid-removal never leaves a step that looks whole or one that is never pruned; such
// leftovers are removed by the next prune.
void prune_checkpoints(const std::string& dir, int64_t keep);

// Held by the one run that writes checkpoints into `dir` (its rank 0, which writes the folder's
// shared files: the index, the publication, the pruning): an exclusive flock on dir/.lock, which
// records the holder ("pid 1234 on host"). Creates `dir` when missing. A second holder is refused
// with IoError naming the first; the lock ends with this object, or with the process however it
// ends (the file stays, unlocked).
class CheckpointDirectoryLock {
 public:
  explicit CheckpointDirectoryLock(const std::string& dir);
  ~CheckpointDirectoryLock();
  CheckpointDirectoryLock(const CheckpointDirectoryLock&) = delete;
  CheckpointDirectoryLock& operator=(const CheckpointDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace meshtrain

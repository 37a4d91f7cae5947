// State shared by all ranks of a LocalWorld: the abort flag that wakes every wait, the live groups
// to wake, and the registry through which the members of a split find one shared group.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace meshtrain::local {

class GroupState;

class WorldState {
 public:
  // The first abort wins; every pending and future wait of every group then throws
  // PeerFailure("rank R failed: reason").
  void abort(int rank, const std::string& reason);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // Valid once aborted() returned true (written once, before the flag is published).
  const std::string& abort_message() const { return abort_message_; }

  std::shared_ptr<GroupState> make_group(std::string name, std::vector<int> world_ranks);

  // Every member of a new group calls this with the same (parent, split number, color) and gets
  // the same group; the entry is dropped once all members have joined.
  std::shared_ptr<GroupState> join_split(uint64_t parent_id, uint64_t split_number, int color,
                                         const std::vector<int>& world_ranks,
                                         const std::string& name);

 private:
  std::shared_ptr<GroupState> make_group_locked(std::string name, std::vector<int> world_ranks);

  struct PendingSplit {
    std::shared_ptr<GroupState> group;
    size_t joined = 0;
  };

  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::string abort_message_;
  uint64_t next_group_id_ = 0;
  std::vector<std::weak_ptr<GroupState>> groups_;
  std::map<std::tuple<uint64_t, uint64_t, int>, PendingSplit> splits_;
};

}  // namespace meshtrain::local

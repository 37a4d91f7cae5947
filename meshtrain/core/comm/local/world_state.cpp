#include "meshtrain/core/comm/local/world_state.h"

#include "meshtrain/core/comm/local/group_state.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {

void WorldState::abort(int rank, const std::string& reason) {
  std::vector<std::shared_ptr<GroupState>> live;
  {
    std::lock_guard lock(mutex_);
    if (aborted()) return;
    abort_message_ = detail::concat("rank ", rank, " failed: ", reason);
    aborted_.store(true, std::memory_order_release);
    for (const auto& weak : groups_)
      if (auto group = weak.lock()) live.push_back(std::move(group));
  }
  // Outside the world lock: a group locks its own mutex to wake its waiters.
  for (const auto& group : live) group->wake_after_abort();
}

std::shared_ptr<GroupState> WorldState::make_group(std::string name, std::vector<int> world_ranks) {
  std::lock_guard lock(mutex_);
  return make_group_locked(std::move(name), std::move(world_ranks));
}

std::shared_ptr<GroupState> WorldState::make_group_locked(std::string name,
                                                          std::vector<int> world_ranks) {
  std::erase_if(groups_, [](const std::weak_ptr<GroupState>& g) { return g.expired(); });
  auto group =
      std::make_shared<GroupState>(*this, next_group_id_++, std::move(name), std::move(world_ranks));
  groups_.push_back(group);
  return group;
}

std::shared_ptr<GroupState> WorldState::join_split(uint64_t parent_id, uint64_t split_number,
                                                   int color, const std::vector<int>& world_ranks,
                                                   const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto key = std::make_tuple(parent_id, split_number, color);
  auto it = splits_.find(key);
  if (it == splits_.end())
    it = splits_.emplace(key, PendingSplit{make_group_locked(name, world_ranks), 0}).first;
  std::shared_ptr<GroupState> group = it->second.group;
  MT_CHECK(group->world_ranks() == world_ranks && group->name() == name,
           "split #", split_number, " of group ", parent_id, ": members disagree on the new group '",
           group->name(), "' (got name '", name, "')");
  if (++it->second.joined == world_ranks.size()) splits_.erase(it);
  return group;
}

}  // namespace meshtrain::local

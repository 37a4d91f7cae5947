// The point-to-point mailbox of one group of the local backend. Posting either side of a transfer
// never waits: the side posted first stays in the mailbox, and whichever thread posts the second
// side moves the data at once and completes both Works. So a rank may post its receives before
// its sends (as pipeline stages do) without holding up its progress thread or its peers'.
// A posted side has no deadline of its own: its waiter's Work::wait timeout bounds the wait, and
// a failed group, an abort or a destroyed communicator fails it (see GroupState::fail).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "meshtrain/core/comm/local/stream_mark.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain::local {

// Identifies one transfer: the n-th send from src to dst meets the n-th recv at dst from src.
struct P2PKey {
  int src = 0;
  int dst = 0;
  uint64_t number = 0;
  auto operator<=>(const P2PKey&) const = default;
};

class Mailbox {
 public:
  // on_mismatch: fails the whole group (its collectives too) with the message; called without
  // the mailbox's lock held, as it fails the mailbox in turn.
  Mailbox(std::string group_name, std::function<void(const std::string&)> on_mismatch);
  // Fails what is still posted: nobody is left to complete it.
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Posts the send side of `key`. The send completes once the receiver has copied the data
  // (the buffer is held until then, so the sender may not reuse it before waiting).
  // `issued` (CUDA buffers only): the owner's stream at issue, which the copy waits for.
  void post_send(const P2PKey& key, Tensor buffer, std::shared_ptr<const StreamMark> issued,
                 std::shared_ptr<AsyncWork> work);
  // Posts the receive side of `key`; it completes once the data is in `buffer`. A sender whose
  // size or dtype differs fails both sides and the group with a message naming both.
  void post_recv(const P2PKey& key, Tensor buffer, std::shared_ptr<const StreamMark> issued,
                 std::shared_ptr<AsyncWork> work);

  // Fails every posted side with PeerFailure(message), and every side posted later; the first
  // message wins. Drops the posted buffers.
  void fail(const std::string& message);

  // One posted side of a transfer.
  struct Side {
    Tensor buffer;
    std::shared_ptr<const StreamMark> issued;
    std::shared_ptr<AsyncWork> work;
  };

 private:
  using Sides = std::map<P2PKey, Side>;

  // Takes the other side of `key` out of the mailbox and completes the transfer, or, when that
  // side has not been posted yet, leaves `mine` for it to find.
  void post(const P2PKey& key, Side mine, bool is_send);
  // Copies send's buffer into recv's and completes both; a size, dtype or memory-kind mismatch
  // fails them. A device copy is finished before either side completes.
  void transfer(const P2PKey& key, Side& send, Side& recv);

  const std::string group_name_;
  const std::function<void(const std::string&)> on_mismatch_;
  std::mutex mutex_;
  std::string failure_;  // empty while healthy
  Sides sends_;          // posted sends waiting for their receive
  Sides recvs_;          // posted receives waiting for their send
};

}  // namespace meshtrain::local

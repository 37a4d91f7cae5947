#include "meshtrain/core/comm/local/mailbox.h"

#include <cstring>

#include "meshtrain/core/comm/local/peer_failure.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"

namespace meshtrain::local {

Mailbox::Mailbox(std::string group_name, std::function<void(const std::string&)> on_mismatch)
    : group_name_(std::move(group_name)), on_mismatch_(std::move(on_mismatch)) {}

Mailbox::~Mailbox() {
  fail(detail::concat("group '", group_name_, "' was destroyed with the op still pending"));
}

void Mailbox::post_send(const P2PKey& key, Tensor buffer, std::shared_ptr<const StreamMark> issued,
                        std::shared_ptr<AsyncWork> work) {
  post(key, Side{std::move(buffer), std::move(issued), std::move(work)}, true);
}

void Mailbox::post_recv(const P2PKey& key, Tensor buffer, std::shared_ptr<const StreamMark> issued,
                        std::shared_ptr<AsyncWork> work) {
  post(key, Side{std::move(buffer), std::move(issued), std::move(work)}, false);
}

namespace {
// Drops the side's buffer before completing or failing its Work, so that a waiter that frees its
// tensors really frees them.
void settle(Mailbox::Side& side, std::exception_ptr error = nullptr) {
  side.buffer = Tensor();
  side.issued.reset();
  const std::shared_ptr<AsyncWork> work = std::move(side.work);
  if (error)
    work->fail(std::move(error));
  else
    work->complete();
}
}  // namespace

void Mailbox::post(const P2PKey& key, Side mine, bool is_send) {
  Side partner;
  {
    std::lock_guard lock(mutex_);
    if (!failure_.empty()) {
      settle(mine, std::make_exception_ptr(PeerFailure(failure_)));
      return;
    }
    Sides& waiting = is_send ? recvs_ : sends_;
    const auto it = waiting.find(key);
    if (it == waiting.end()) {
      (is_send ? sends_ : recvs_).emplace(key, std::move(mine));
      return;
    }
    partner = std::move(it->second);
    waiting.erase(it);
  }
  // Both sides are out of the mailbox: nothing else can touch them, so the copy runs unlocked
  // and other transfers and collectives of the group go on meanwhile.
  if (is_send)
    transfer(key, mine, partner);
  else
    transfer(key, partner, mine);
}

void Mailbox::transfer(const P2PKey& key, Side& send, Side& recv) {
  const Tensor& from = send.buffer;
  const Tensor& to = recv.buffer;
  if (from.nbytes() != to.nbytes() || from.dtype() != to.dtype() ||
      from.device().kind != to.device().kind) {
    const std::string message = detail::concat(
        "send/recv mismatch on group '", group_name_, "': rank ", key.src, "'s send #", key.number,
        " to rank ", key.dst, " has ", from.nbytes(), " bytes (", dtype_name(from.dtype()),
        ") on ", to_string(from.device()), " but rank ", key.dst, "'s recv expects ", to.nbytes(),
        " bytes (", dtype_name(to.dtype()), ") on ", to_string(to.device()),
        " (host and device buffers do not mix)");
    // The receiver's error is the root cause; the sender learns of it second hand.
    settle(recv, std::make_exception_ptr(CommError(message)));
    settle(send, std::make_exception_ptr(PeerFailure(message)));
    on_mismatch_(message);
    return;
  }
  if (to.nbytes() == 0 || to.device().is_meta()) {
    // nothing to move
  } else if (to.device().is_cpu()) {
    std::memcpy(to.raw_data(), from.raw_data(), to.nbytes());
  } else {
    try {
      order_after(send.issued, to.device());
      order_after(recv.issued, to.device());
      device_memcpy(to.raw_data(), to.device(), from.raw_data(), from.device(), to.nbytes());
      device_synchronize(to.device());  // both owners may reuse their buffers once settled
    } catch (...) {
      settle(recv, std::current_exception());
      settle(send, std::make_exception_ptr(PeerFailure(
                       detail::concat("the device copy of rank ", key.src, "'s send #", key.number,
                                      " to rank ", key.dst, " failed"))));
      return;
    }
  }
  settle(recv);
  settle(send);
}

void Mailbox::fail(const std::string& message) {
  Sides sends;
  Sides recvs;
  {
    std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = message;
    sends.swap(sends_);
    recvs.swap(recvs_);
  }
  for (Sides* sides : {&sends, &recvs})
    for (auto& [key, side] : *sides) settle(side, std::make_exception_ptr(PeerFailure(message)));
}

}  // namespace meshtrain::local

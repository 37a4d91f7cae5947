// Communicator: a group of ranks and the flat-buffer collectives between them. Backends (local,
// mpi, nccl) implement the do_* hooks; this base class validates arguments, counts bytes and builds
// sub-communicators, so every backend behaves the same at its edges.
//
// Every op is asynchronous and returns a Work; buffers must stay alive until it completes (the
// Work keeps the tensor handles). Ops of one communicator must be issued from one thread, in the
// same order on every member (SPMD).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/comm/types.h"
#include "meshtrain/core/comm/work.h"
#include "meshtrain/core/tensor.h"

namespace meshtrain {

namespace trace {
class Recorder;
}

// One transfer of a batch_p2p(): send `buffer` to `peer`, or receive `peer`'s message into it.
struct P2POp {
  enum Kind { send, recv } kind;
  Tensor buffer;
  int peer;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  const std::string& name() const { return name_; }
  // World rank of every member, in group order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  int world_rank() const { return world_ranks_[rank_]; }
  const CommOptions& options() const { return options_; }

  virtual std::string_view backend_name() const = 0;
  virtual bool supports(CommOp op) const = 0;
  // Where small exchanges of host values (split, gathered metrics) stage their buffers: a device
  // whose buffers this backend accepts (the host, or this rank's GPU for nccl).
  virtual Device exchange_device() const { return Device::cpu(); }

  // out (W * n elements) = concatenation of every rank's in (n elements), in rank order.
  // With out on a GPU, in may be in host memory: the backend copies it in on its own stream, as
  // FSDP2 does offloaded shards (pinned host memory makes that copy asynchronous; nccl takes
  // pinned memory only).
  WorkPtr all_gather_into(const Tensor& out, const Tensor& in);
  // out (n elements) = rank's chunk of the reduction of every rank's in (W * n elements).
  // With in on a GPU, out may be in host memory: the backend copies the reduced chunk out on its
  // own stream, and out holds it once the op completes (nccl: pinned memory only).
  WorkPtr reduce_scatter_into(const Tensor& out, const Tensor& in, ReduceOp op);
  WorkPtr all_reduce(const Tensor& buffer, ReduceOp op);
  WorkPtr broadcast(const Tensor& buffer, int root);
  // The n-th send from rank a to rank b meets the n-th recv at b from a, whose buffer must have
  // the same size and dtype. A one-op batch_p2p().
  WorkPtr send(const Tensor& buffer, int peer);
  WorkPtr recv(const Tensor& buffer, int peer);
  // Batched point-to-point (as torch.distributed.batch_isend_irecv): starts every op of the
  // batch together and returns one Work per op, in order, so that a pipeline can wait for a
  // received activation while its own sends are still in flight. No op of a batch waits for
  // another op of the batch or of a later call, so neighbours that post their receives before
  // their sends cannot deadlock, on any backend. Every op is validated before any starts, and
  // each is counted as one send or recv call. An empty batch returns no Work.
  //
  // Separate send()/recv() calls do not wait for each other on the local and mpi backends
  // either, but on nccl they run in issue order on one stream: there, put transfers that could
  // wait in a cycle (a receive before a send, between neighbours) into one batch.
  std::vector<WorkPtr> batch_p2p(const std::vector<P2POp>& ops);
  // in and out hold W equal chunks; chunk j of in goes to rank j, chunk i of out comes from rank i.
  WorkPtr all_to_all(const Tensor& out, const Tensor& in);
  WorkPtr barrier();

  // Collective over this communicator: ranks passing the same color form a sub-communicator,
  // ordered by key, then by rank here.
  std::unique_ptr<Communicator> split(int color, int key, std::string name);
  // Collective: each rank passes the members (ranks here) of its own group, which must include
  // itself; groups must partition this communicator.
  std::unique_ptr<Communicator> split_group(const std::vector<int>& group, std::string name);

  const CommCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 protected:
  Communicator(int rank, std::vector<int> world_ranks, std::string name, CommOptions options);

  // "all_gather of 4096 bytes on group 'dp_shard' (size 4) at rank 1 (world rank 5)"
  std::string describe(CommOp op, size_t bytes) const;
  // "recv of 4096 bytes from rank 0 on group 'pp' (size 2, local) at rank 1 (world rank 3)"
  std::string describe(const P2POp& op) const;
  // split_group's group, its members checked: by default a split() by colours, which every rank
  // takes part in; a group that knows its members without an exchange (the planner's shape-only
  // groups, for one rank alone) makes itself.
  virtual std::unique_ptr<Communicator> make_group(const std::vector<int>& members,
                                                   std::string name);
  // Throws NotSupported naming the backend unless supports(op).
  void require(CommOp op) const;
  // Backends check that buffers live where they can reach them (host or a CUDA device).
  virtual void check_buffer(const Tensor& buffer, std::string_view what) const = 0;
  // And a host buffer crossing to a GPU (offload's all-gather input, reduce-scatter output).
  virtual void check_host_crossing(const Tensor& /*host*/, std::string_view /*what*/) const {}

  virtual WorkPtr do_all_gather(const Tensor& out, const Tensor& in) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual WorkPtr do_all_reduce(const Tensor& buffer, ReduceOp op) = 0;
  virtual WorkPtr do_broadcast(const Tensor& buffer, int root) = 0;
  // ops: validated and not empty. Returns one Work per op, in order; must not wait for any peer.
  virtual std::vector<WorkPtr> do_batch_p2p(const std::vector<P2POp>& ops) = 0;
  virtual WorkPtr do_all_to_all(const Tensor& out, const Tensor& in) = 0;
  virtual WorkPtr do_barrier() = 0;
  // members: ranks here of the new group, in its order (the caller is among them).
  virtual std::unique_ptr<Communicator> do_split(const std::vector<int>& members, int color,
                                                 int key, std::string name) = 0;

 private:
  // Which buffer of an op may be in host memory while the other is on a GPU.
  enum class Crossing { none, host_in, host_out };
  // Checks that in and out share a device, except for the one crossing `crossing` allows, and
  // each buffer with check_buffer, or, crossing, with check_host_crossing.
  void check_placement(const Tensor& out, const Tensor& in, std::string_view op,
                       Crossing crossing) const;
  void count(CommOp op, uint64_t sent, uint64_t received);
  // Tracing (core/trace): when the calling thread traces, the recorder and the issue time, taken
  // before the backend starts the op; traced() then tags the op's Work with them.
  struct Issue {
    trace::Recorder* recorder = nullptr;
    int64_t ns = 0;
  };
  Issue issue() const;
  WorkPtr traced(const Issue& issue, std::string_view op, WorkPtr work) const;
  void check_peer(int peer, std::string_view what) const;

  int rank_;
  std::vector<int> world_ranks_;
  std::string name_;
  CommOptions options_;
  CommCounters counters_;
};

}  // namespace meshtrain

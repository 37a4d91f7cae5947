#include "meshtrain/plugins/pp/pipeline_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/op_counts.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/core/trace/recorder.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

namespace {
using Key = std::pair<int, int>;  // (stage, micro-batch)

// A posted transfer and the buffer it must keep alive until it completes.
struct Transfer {
  WorkPtr work;
  Tensor buffer;
};

// The step's transfers and the activations and gradients that cross stage boundaries.
struct StepState {
  std::map<Key, Transfer> inputs;     // RECV_F: the stage's input
  std::map<Key, Transfer> out_grads;  // RECV_B: the gradient of the stage's output
  std::map<Key, Tensor> outputs;      // F: the stage's output, until sent or used here
  std::map<Key, Tensor> in_grads;     // B/I: the gradient of the stage's input, likewise
  std::vector<Transfer> sends;
  // Consecutive transfers of the schedule go out as one batch (one NCCL group): what each posted
  // op's Work belongs to.
  std::vector<P2POp> batch;
  std::vector<std::pair<std::map<Key, Transfer>*, Key>> batch_into;  // receives: where; sends: null

  void post(P2POp op, std::map<Key, Transfer>* into, const Key& key) {
    batch.push_back(std::move(op));
    batch_into.push_back({into, key});
  }
  void flush(Communicator& comm) {
    if (batch.empty()) return;
    const std::vector<WorkPtr> works = comm.batch_p2p(batch);
    for (size_t i = 0; i < works.size(); ++i) {
      const auto& [into, key] = batch_into[i];
      if (into) {
        (*into)[key] = {works[i], batch[i].buffer};
      } else {
        sends.push_back({works[i], batch[i].buffer});
      }
    }
    batch.clear();
    batch_into.clear();
  }

  // Drops the sends that have completed, freeing their buffers as a schedule expects.
  void reap_sends() {
    std::erase_if(sends, [](Transfer& t) { return t.work->is_completed(); });
  }
};

// A send's own copy (MemoryCategory::comm): the activation is freed now, whenever the receiver
// takes the copy, so what a stage holds follows its schedule alone.
Tensor staged(const Tensor& t) {
  MemoryCategoryScope scope(MemoryCategory::comm);
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy.copy_from(t);
  return copy;
}

// This rank's receives (RECV_F or RECV_B, for the receiving stage) from each peer, in the order
// that peer sends them. Transfers between two ranks match in the order they are posted, on every
// backend (p2p carries no tag), while a schedule may receive in another order than its peer sends:
// interleaved at pp=2 with an odd number of micro-batches sends one micro-batch's gradient between
// two activations that the receiver takes in a row. The runner posts each peer's receives in this
// order, so every message lands in its own buffer whatever the schedule's order.
std::map<int, std::vector<Action>> receives_by_sender(const Schedule& plan, int me) {
  std::map<int, std::vector<Action>> out;
  for (int peer = 0; peer < static_cast<int>(plan.per_rank.size()); ++peer) {
    if (peer == me) continue;
    for (const Action& a : plan.per_rank[peer]) {
      if (!is_send(a.kind)) continue;
      const Action recv = matching_transfer(a);
      if (plan.rank_of(recv.stage) == me) out[peer].push_back(recv);
    }
  }
  return out;
}

Tensor take(std::map<Key, Tensor>& from, const Key& key, const char* what) {
  const auto it = from.find(key);
  MT_ASSERT(it != from.end(), "pipeline: ", what, " of stage ", key.first, ", micro-batch ",
            key.second, " is missing (the schedule uses it before it exists)");
  Tensor t = std::move(it->second);
  from.erase(it);
  return t;
}

Tensor wait_for(std::map<Key, Transfer>& from, const Key& key, const char* what) {
  const auto it = from.find(key);
  MT_ASSERT(it != from.end(), "pipeline: ", what, " of stage ", key.first, ", micro-batch ",
            key.second, " was never received (the schedule lacks its RECV)");
  it->second.work->wait();
  Tensor t = std::move(it->second.buffer);
  from.erase(it);
  return t;
}
}  // namespace

PipelineTiming& PipelineTiming::operator+=(const PipelineTiming& other) {
  step_s += other.step_s;
  forward_s += other.forward_s;
  backward_input_s += other.backward_input_s;
  backward_weight_s += other.backward_weight_s;
  transfer_wait_s += other.transfer_wait_s;
  forwards += other.forwards;
  backwards += other.backwards;
  weights += other.weights;
  return *this;
}

Tensor PipelineRunner::boundary_buffer(const MicroBatch& mb) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  return Tensor::empty(engine_.model().activation_shape(mb), activation_dtype_,
                       activation_device_);
}

PipelineRunner::PipelineRunner(Engine& engine, TrainableState& state, DeviceMesh& mesh,
                               PipelinePlacement placement, DType activation_dtype)
    : StepRunner(engine, mesh),
      state_(state),
      pp_(mesh.comm(mesh_axis::pp)),
      placement_(std::move(placement)),
      activation_dtype_(activation_dtype),
      activation_device_(engine.model().parameters().front()->device()) {}

namespace {
// The schedule for `micro_batches` from `cache`, made on first use.
template <typename Make>
const Schedule& cached(std::map<int, Schedule>& cache, int micro_batches, Make make) {
  auto it = cache.find(micro_batches);
  if (it == cache.end()) it = cache.emplace(micro_batches, make()).first;
  return it->second;
}
}  // namespace

const Schedule& PipelineRunner::schedule(int micro_batches) {
  return cached(schedules_, micro_batches, [&] {
    return make_schedule(placement_.schedule, placement_.ranks, micro_batches,
                         placement_.virtual_stages);
  });
}

void PipelineRunner::run_micro_batches(std::vector<MicroBatch>& micro_batches) {
  const Schedule& plan = schedule(static_cast<int>(micro_batches.size()));
  const auto start = std::chrono::steady_clock::now();
  timing_ = execute(plan, micro_batches, true);
  engine_.finish_backward();
  sum_tied_gradients();
  timing_.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double PipelineRunner::evaluate(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  prepare(micro_batches, global_tokens);
  const int m = static_cast<int>(micro_batches.size());
  execute(
      cached(forward_schedules_, m,
             [&] { return make_forward_schedule(placement_.ranks, m, placement_.virtual_stages); }),
      micro_batches, false);
  engine_.finish_forward_only();
  return reduce_loss(micro_batches, global_tokens);
}

PipelineTiming PipelineRunner::execute(const Schedule& plan, std::vector<MicroBatch>& micro_batches,
                                       bool for_backward) {
  const std::vector<Action>& actions = plan.per_rank.at(placement_.rank);
  const int last_stage = plan.stages() - 1;
  const auto chunk_of = [&](int stage) {
    const auto it = std::find(placement_.stages.begin(), placement_.stages.end(), stage);
    MT_ASSERT(it != placement_.stages.end(), "pipeline: stage ", stage, " is not on pp rank ",
              placement_.rank);
    return static_cast<int>(it - placement_.stages.begin());
  };
  // Each stage's last action that completes gradients (B, or W when backward is split): FSDP
  // reduces its units' gradients then.
  std::map<int, size_t> last_backward;
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == ActionKind::full_backward ||
        actions[i].kind == ActionKind::backward_weight)
      last_backward[actions[i].stage] = i;

  const std::map<int, std::vector<Action>> sender_order = receives_by_sender(plan, placement_.rank);
  std::map<int, size_t> posted_from;  // per peer: how many of its messages have receives posted
  // Posts the receives from `peer` up to and including `recv` (once each), in the peer's order.
  const auto post_receives_through = [&](StepState& st, int peer, const Action& recv) {
    const auto order = sender_order.find(peer);
    const auto at = order == sender_order.end()
                        ? std::vector<Action>::const_iterator()
                        : std::find(order->second.begin(), order->second.end(), recv);
    MT_ASSERT(order != sender_order.end() && at != order->second.end(), "pipeline: pp rank ",
              peer, " sends nothing for ", to_string(recv), " on pp rank ", placement_.rank);
    const size_t through = static_cast<size_t>(at - order->second.begin());
    for (size_t& next = posted_from[peer]; next <= through; ++next) {
      const Action& r = order->second[next];
      st.post({P2POp::recv, boundary_buffer(micro_batches.at(r.micro_batch)), peer},
              r.kind == ActionKind::recv_f ? &st.inputs : &st.out_grads, {r.stage, r.micro_batch});
    }
  };

  StepState st;
  PipelineTiming timing;
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (is_compute(a.kind)) st.flush(pp_);  // the transfers before it go out together
    // A compute action is one span of the trace around its wait for input and its layers.
    std::optional<trace::Scope> action_span;
    if (is_compute(a.kind) && trace::current())
      action_span.emplace(trace::Kind::other, [&] { return "pipeline " + to_string(a); });
    // And its kernels one section of the counts (the planner's per-action costs).
    std::optional<ops::OpCountSection> counted_section;
    if (is_compute(a.kind) && ops::current_op_counts()) counted_section.emplace(to_string(a));
    auto start = Clock::now();
    const Key key{a.stage, a.micro_batch};
    MicroBatch& mb = micro_batches.at(a.micro_batch);
    switch (a.kind) {
      case ActionKind::recv_f:
        post_receives_through(st, plan.rank_of(a.stage - 1), a);
        break;
      case ActionKind::recv_b:
        post_receives_through(st, plan.rank_of(a.stage + 1), a);
        break;
      case ActionKind::send_f:
        st.post({P2POp::send, staged(take(st.outputs, key, "the output")),
                 plan.rank_of(a.stage + 1)},
                nullptr, key);
        break;
      case ActionKind::send_b:
        st.post({P2POp::send, staged(take(st.in_grads, key, "the input gradient")),
                 plan.rank_of(a.stage - 1)},
                nullptr, key);
        break;
      case ActionKind::forward: {
        if (a.stage > 0)
          mb.hidden = plan.rank_of(a.stage - 1) == placement_.rank
                          ? take(st.outputs, {a.stage - 1, a.micro_batch}, "the output")
                          : wait_for(st.inputs, key, "the input");
        timing.transfer_wait_s += seconds_since(start);
        start = Clock::now();  // after the wait for the input: that is bubble, not compute
        if (for_backward)
          engine_.forward(mb, placement_.spans[chunk_of(a.stage)]);
        else
          engine_.forward_only(mb, placement_.spans[chunk_of(a.stage)]);
        timing.forward_s += seconds_since(start);
        ++timing.forwards;
        if (a.stage < last_stage) st.outputs[key] = std::move(mb.hidden);
        mb.hidden = Tensor();
        break;
      }
      case ActionKind::full_backward:
      case ActionKind::backward_input: {
        if (a.stage < last_stage)
          mb.hidden = plan.rank_of(a.stage + 1) == placement_.rank
                          ? take(st.in_grads, {a.stage + 1, a.micro_batch}, "the input gradient")
                          : wait_for(st.out_grads, key, "the output gradient");
        timing.transfer_wait_s += seconds_since(start);
        start = Clock::now();
        engine_.backward(mb, placement_.spans[chunk_of(a.stage)], last_backward[a.stage] == i,
                         a.kind == ActionKind::full_backward ? BackwardPart::full
                                                             : BackwardPart::input);
        timing.backward_input_s += seconds_since(start);
        ++timing.backwards;
        if (a.stage > 0) st.in_grads[key] = std::move(mb.hidden);
        mb.hidden = Tensor();
        break;
      }
      case ActionKind::backward_weight:
        engine_.backward(mb, placement_.spans[chunk_of(a.stage)], last_backward[a.stage] == i,
                         BackwardPart::weight);
        timing.backward_weight_s += seconds_since(start);
        ++timing.weights;
        break;
    }
    st.reap_sends();
  }
  st.flush(pp_);
  const auto sends_start = Clock::now();
  for (Transfer& t : st.sends) t.work->wait();
  timing.transfer_wait_s += seconds_since(sends_start);
  return timing;
}

void PipelineRunner::sum_tied_gradients() {
  if (placement_.tied.empty()) return;
  for (const OptimizerSlot& slot : state_.optimizer_slots()) {
    const auto tied = placement_.tied.find(slot.name);
    if (tied == placement_.tied.end()) continue;
    // Every holder sends its gradient to the others and adds theirs: the same sum everywhere.
    // A GPU backend moves its GPU's memory only, so an offloaded (host) gradient travels there.
    const Device via =
        pp_.exchange_device().is_cuda() ? pp_.exchange_device() : slot.grad.device();
    const Tensor mine = slot.grad.on(via);
    std::vector<P2POp> exchange;
    std::vector<Tensor> theirs;
    for (int peer : tied->second) {
      theirs.push_back(Tensor::empty(slot.grad.shape(), slot.grad.dtype(), via));
      exchange.push_back({P2POp::send, mine, peer});
      exchange.push_back({P2POp::recv, theirs.back(), peer});
    }
    for (const WorkPtr& w : pp_.batch_p2p(exchange)) w->wait();
    for (const Tensor& t : theirs) ops::axpy(slot.grad, 1.f, t.on(slot.grad.device()));
  }
}

}  // namespace meshtrain

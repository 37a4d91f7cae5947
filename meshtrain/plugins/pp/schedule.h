// Pipeline schedules as data: per pipeline rank, the list of actions it runs in order. Written in
// PyTorch's notation `{stage}{kind}{micro-batch}`: `1F3` is the forward of stage 1 on micro-batch
// 3, `0SEND_F1` stage 0 sending micro-batch 1's activations on. A generic runtime executes any
// schedule that validate() accepts (schedule_sim.h); generators are in schedule_generators.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

enum class ActionKind {
  forward,          // F: the stage's forward
  backward_input,   // I: gradient of the stage's input only (zero-bubble schedules split backward)
  backward_weight,  // W: gradient of the stage's weights, after its I
  full_backward,    // B: both gradients at once
  send_f,           // SEND_F: post the stage's output to the next stage (non-blocking)
  recv_f,           // RECV_F: receive the stage's input from the previous stage (blocks)
  send_b,           // SEND_B: post the gradient of the stage's input to the previous stage
  recv_b,           // RECV_B: receive the gradient of the stage's output from the next stage
};

std::string_view action_kind_name(ActionKind kind);  // "F", "I", ..., "RECV_B"
bool is_compute(ActionKind kind);                    // F, I, W or B
bool is_send(ActionKind kind);
bool is_recv(ActionKind kind);

// `stage` is the global (virtual) stage index 0..S-1 and is the stage on the rank that runs the
// action, also for sends and receives (PyTorch's convention).
struct Action {
  ActionKind kind;
  int stage;
  int micro_batch;
  auto operator<=>(const Action&) const = default;  // ordered, so actions can key a std::map
};

std::string to_string(const Action& action);  // "1F3"
// Reads one action token; throws InvalidArgument naming the token when it is not one.
Action parse_action(std::string_view token);

// The other end of a transfer: 0SEND_F1 <-> 1RECV_F1 and 1SEND_B1 <-> 0RECV_B1.
Action matching_transfer(const Action& send_or_recv);

struct Schedule {
  int ranks = 1;
  int virtual_stages = 1;  // stages per rank; rank r holds stages r, r + ranks, r + 2 * ranks, ...
  int micro_batches = 1;
  std::vector<std::vector<Action>> per_rank;

  int stages() const { return ranks * virtual_stages; }
  int rank_of(int stage) const { return stage % ranks; }
  // The header line, then one line per rank: "rank 0: 0F0 0SEND_F0 ...". parse_schedule reads it.
  std::string to_string() const;
  bool operator==(const Schedule&) const = default;
};

// Reads what Schedule::to_string writes; blank lines and `#` comments are allowed. Checks syntax
// only (validate() checks meaning); errors name the line and the token.
Schedule parse_schedule(std::string_view text);

}  // namespace meshtrain

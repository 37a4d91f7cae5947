#include "meshtrain/plugins/pp/schedule.h"

#include <array>
#include <cctype>
#include <sstream>
#include <utility>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"

namespace meshtrain {
namespace {

constexpr std::array<std::pair<ActionKind, std::string_view>, 8> kKindNames{{
    {ActionKind::forward, "F"},
    {ActionKind::backward_input, "I"},
    {ActionKind::backward_weight, "W"},
    {ActionKind::full_backward, "B"},
    {ActionKind::send_f, "SEND_F"},
    {ActionKind::recv_f, "RECV_F"},
    {ActionKind::send_b, "SEND_B"},
    {ActionKind::recv_b, "RECV_B"},
}};

constexpr std::string_view kHeaderForm = "schedule ranks=P virtual_stages=V micro_batches=M";

// A non-negative decimal that fits an int, or false.
bool parse_count(std::string_view digits, int& value) {
  const std::optional<int> parsed = parse_integer<int>(digits);
  if (!parsed || *parsed < 0) return false;
  value = *parsed;
  return true;
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  while (!(s = trim(s)).empty()) {
    const size_t end = s.find_first_of(" \t");
    words.push_back(s.substr(0, end));
    s = end == std::string_view::npos ? std::string_view{} : s.substr(end);
  }
  return words;
}

// "key=N" -> N.
int parse_header_field(std::string_view word, std::string_view key, int line) {
  int value = 0;
  if (!word.starts_with(key) || word.size() <= key.size() || word[key.size()] != '=' ||
      !parse_count(word.substr(key.size() + 1), value) || value < 1)
    throw InvalidArgument(detail::concat("schedule line ", line, ": bad header field '", word,
                                         "', expected ", key, "=N with N >= 1 (header form: '",
                                         kHeaderForm, "')"));
  return value;
}

Schedule parse_header(std::string_view content, int line) {
  const std::vector<std::string_view> words = split_words(content);
  if (words.size() != 4 || words[0] != "schedule")
    throw InvalidArgument(detail::concat("schedule line ", line, ": expected the header '",
                                         kHeaderForm, "', got '", content, "'"));
  Schedule schedule;
  schedule.ranks = parse_header_field(words[1], "ranks", line);
  schedule.virtual_stages = parse_header_field(words[2], "virtual_stages", line);
  schedule.micro_batches = parse_header_field(words[3], "micro_batches", line);
  return schedule;
}

// "rank R: a b c" for the expected R.
std::vector<Action> parse_rank_line(std::string_view content, int line, int rank) {
  const size_t colon = content.find(':');
  const std::vector<std::string_view> label = split_words(content.substr(0, colon));
  int labelled = -1;
  if (colon == std::string_view::npos || label.size() != 2 || label[0] != "rank" ||
      !parse_count(label[1], labelled) || labelled != rank)
    throw InvalidArgument(detail::concat("schedule line ", line, ": expected 'rank ", rank,
                                         ":' followed by actions, got '", content, "'"));
  std::vector<Action> actions;
  for (std::string_view token : split_words(content.substr(colon + 1))) {
    try {
      actions.push_back(parse_action(token));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(
          detail::concat("schedule line ", line, " (rank ", rank, "): ", e.what()));
    }
  }
  return actions;
}

}  // namespace

std::string_view action_kind_name(ActionKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  return "?";
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::forward || kind == ActionKind::backward_input ||
         kind == ActionKind::backward_weight || kind == ActionKind::full_backward;
}
bool is_send(ActionKind kind) { return kind == ActionKind::send_f || kind == ActionKind::send_b; }
bool is_recv(ActionKind kind) { return kind == ActionKind::recv_f || kind == ActionKind::recv_b; }

std::string to_string(const Action& action) {
  return detail::concat(action.stage, action_kind_name(action.kind), action.micro_batch);
}

Action parse_action(std::string_view token) {
  const size_t kind_begin = token.find_first_not_of("0123456789");
  const size_t kind_end = token.find_first_of("0123456789", kind_begin);
  Action action{ActionKind::forward, 0, 0};
  bool known_kind = false;
  if (kind_begin != std::string_view::npos && kind_end != std::string_view::npos) {
    const std::string_view kind = token.substr(kind_begin, kind_end - kind_begin);
    for (const auto& [k, name] : kKindNames)
      if (name == kind) action.kind = k, known_kind = true;
  }
  if (!known_kind || !parse_count(token.substr(0, kind_begin), action.stage) ||
      !parse_count(token.substr(kind_end), action.micro_batch))
    throw InvalidArgument(detail::concat(
        "bad action '", token,
        "', expected {stage}{kind}{micro-batch} with kind F, I, W, B, SEND_F, RECV_F, SEND_B or "
        "RECV_B, e.g. 1F3"));
  return action;
}

Action matching_transfer(const Action& a) {
  switch (a.kind) {
    case ActionKind::send_f: return {ActionKind::recv_f, a.stage + 1, a.micro_batch};
    case ActionKind::recv_f: return {ActionKind::send_f, a.stage - 1, a.micro_batch};
    case ActionKind::send_b: return {ActionKind::recv_b, a.stage - 1, a.micro_batch};
    case ActionKind::recv_b: return {ActionKind::send_b, a.stage + 1, a.micro_batch};
    default: break;
  }
  throw InvalidArgument(detail::concat(to_string(a), " is a computation, not a send or receive"));
}

std::string Schedule::to_string() const {
  std::ostringstream out;
  out << "schedule ranks=" << ranks << " virtual_stages=" << virtual_stages
      << " micro_batches=" << micro_batches << "\n";
  for (size_t r = 0; r < per_rank.size(); ++r) {
    out << "rank " << r << ":";
    for (const Action& a : per_rank[r]) out << " " << meshtrain::to_string(a);
    out << "\n";
  }
  return out.str();
}

Schedule parse_schedule(std::string_view text) {
  Schedule schedule;
  bool have_header = false;
  int line = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view content = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line;
    content = trim(content.substr(0, content.find('#')));
    if (content.empty()) continue;
    if (!have_header) {
      schedule = parse_header(content, line);
      have_header = true;
      continue;
    }
    const int rank = static_cast<int>(schedule.per_rank.size());
    if (rank == schedule.ranks)
      throw InvalidArgument(
          detail::concat("schedule line ", line, ": more rank lines than ranks=", schedule.ranks));
    schedule.per_rank.push_back(parse_rank_line(content, line, rank));
  }
  if (!have_header)
    throw InvalidArgument(detail::concat("empty schedule, expected the header '", kHeaderForm,
                                         "' and one 'rank R: ...' line per rank"));
  if (static_cast<int>(schedule.per_rank.size()) != schedule.ranks)
    throw InvalidArgument(detail::concat("schedule has ", schedule.per_rank.size(),
                                         " rank lines but its header says ranks=", schedule.ranks));
  return schedule;
}

}  // namespace meshtrain

// Small host values gathered from every rank, bit-exact (the values travel as raw bits, no
// arithmetic), for metrics and checks: losses, byte counts, timings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meshtrain/core/comm/communicator.h"

namespace meshtrain {

// Collective: every rank's values, rank-major (rank r's values at [r * n, (r + 1) * n)).
std::vector<uint64_t> all_gather_values(Communicator& comm, const std::vector<uint64_t>& mine);
std::vector<double> all_gather_values(Communicator& comm, const std::vector<double>& mine);
// Collective: every rank's values when ranks hold different counts (rank r's at [r]): the counts
// travel first, then the values padded to the longest.
std::vector<std::vector<uint64_t>> all_gather_variable(Communicator& comm,
                                                       const std::vector<uint64_t>& mine);
// The same for text (error messages, descriptions): every rank's string, by rank.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);
// Collective: InvalidArgument on every rank unless every rank passes the same `mine`; the message
// says `what` and names the first rank that differs from rank 0, with both values.
void require_same_on_every_rank(Communicator& comm, const std::string& mine, std::string_view what);
// Collective: the sum of every rank's value, added in rank order, so every rank gets the same
// bits whatever the backend's reduction order.
double sum_in_rank_order(Communicator& comm, double mine);

}  // namespace meshtrain

#include "meshtrain/core/comm/gather_values.h"

#include <algorithm>
#include <cstring>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {
// 8-byte values travel as pairs of i32 (a dtype every backend moves).
template <typename T>
std::vector<T> gather_8_byte(Communicator& comm, const std::vector<T>& mine) {
  static_assert(sizeof(T) == 8);
  const int64_t n = static_cast<int64_t>(mine.size());
  Tensor in = Tensor::empty({2 * n}, DType::i32);
  if (n) std::memcpy(in.raw_data(), mine.data(), n * sizeof(T));
  // Stage through the device the backend moves data on (the host, or the GPU for nccl).
  const Device device = comm.exchange_device();
  Tensor out = Tensor::empty({2 * n * comm.size()}, DType::i32, device);
  comm.all_gather_into(out, in.on(device))->wait();
  out = out.on(Device::cpu());
  std::vector<T> all(static_cast<size_t>(n * comm.size()));
  if (!all.empty()) std::memcpy(all.data(), out.raw_data(), all.size() * sizeof(T));
  return all;
}
}  // namespace

std::vector<uint64_t> all_gather_values(Communicator& comm, const std::vector<uint64_t>& mine) {
  return gather_8_byte(comm, mine);
}

std::vector<double> all_gather_values(Communicator& comm, const std::vector<double>& mine) {
  return gather_8_byte(comm, mine);
}

std::vector<std::vector<uint64_t>> all_gather_variable(Communicator& comm,
                                                       const std::vector<uint64_t>& mine) {
  const std::vector<uint64_t> counts = all_gather_values(comm, std::vector<uint64_t>{mine.size()});
  uint64_t longest = 0;
  for (uint64_t c : counts) longest = std::max(longest, c);
  std::vector<uint64_t> padded(longest, 0);
  std::copy(mine.begin(), mine.end(), padded.begin());
  const std::vector<uint64_t> all = all_gather_values(comm, padded);
  std::vector<std::vector<uint64_t>> out(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) {
    const auto begin = all.begin() + static_cast<int64_t>(r * longest);
    out[r].assign(begin, begin + static_cast<int64_t>(counts[r]));
  }
  return out;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  std::vector<uint64_t> words((mine.size() + 7) / 8, 0);
  if (!mine.empty()) std::memcpy(words.data(), mine.data(), mine.size());
  words.push_back(mine.size());
  std::vector<std::string> out;
  for (const std::vector<uint64_t>& theirs : all_gather_variable(comm, words)) {
    const size_t length = static_cast<size_t>(theirs.back());
    out.emplace_back(reinterpret_cast<const char*>(theirs.data()), length);
  }
  return out;
}

void require_same_on_every_rank(Communicator& comm, const std::string& mine, std::string_view what) {
  const std::vector<std::string> all = all_gather_strings(comm, mine);
  for (size_t r = 1; r < all.size(); ++r)
    MT_CHECK(all[r] == all[0], what, " differs between ranks: rank 0 has '", all[0], "', rank ", r,
             " has '", all[r], "'");
}

double sum_in_rank_order(Communicator& comm, double mine) {
  double total = 0.0;
  for (double part : all_gather_values(comm, std::vector<double>{mine})) total += part;
  return total;
}

}  // namespace meshtrain

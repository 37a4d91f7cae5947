#include "core/comm/gather_values.h"

#include <cstring>

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
  comm.all_gather_into(out, in.to(device))->wait();
  if (!device.is_cpu()) out = out.to(Device::cpu());
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

double sum_in_rank_order(Communicator& comm, double mine) {
  double total = 0.0;
  for (double part : all_gather_values(comm, std::vector<double>{mine})) total += part;
  return total;
}

}  // namespace meshtrain

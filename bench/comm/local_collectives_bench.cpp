// Collectives of the local backend (ranks as threads, shared memory), reported as nccl-tests
// algbw / busbw in GB/s, next to a single-thread memcpy at the same sizes for reference.
//
//   local_collectives_bench --benchmark_filter='(all_gather|reduce_scatter)/4/16777216|memcpy/16777216'
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/comm/bus_bandwidth.h"
#include "meshtrain/core/comm/local/local_world.h"

namespace meshtrain::bench {
namespace {

// nccl-tests sizes of the full buffer: 1 KiB to 64 MiB in x4 steps.
std::vector<int64_t> sizes() {
  std::vector<int64_t> out;
  for (int64_t s = 1 << 10; s <= (int64_t{64} << 20); s *= 4) out.push_back(s);
  return out;
}

// One rank's out-of-place buffers for a collective whose full buffer is `size` bytes of f32.
struct RankBuffers {
  Tensor in, out;
  RankBuffers(CommOp op, int64_t size, int world) {
    const int64_t full = size / 4, part = full / world;
    // zeros(): pages are touched before timing starts.
    in = Tensor::zeros({op == CommOp::all_gather ? part : full});
    out = Tensor::zeros({op == CommOp::reduce_scatter ? part : full});
  }
  WorkPtr issue(Communicator& comm, CommOp op) const {
    switch (op) {
      case CommOp::all_gather: return comm.all_gather_into(out, in);
      case CommOp::reduce_scatter: return comm.reduce_scatter_into(out, in, ReduceOp::sum);
      default: return comm.all_reduce(out, ReduceOp::sum);
    }
  }
};

void set_bandwidth(benchmark::State& state, const CollectiveDescriptor& collective, int world,
                   int64_t size, double seconds) {
  const double per_op = seconds / static_cast<double>(state.iterations());
  const Bandwidth bw = bandwidth(collective, world, static_cast<double>(size), per_op);
  state.counters["algbw_GBps"] = bw.algbw_gbps;
  state.counters["busbw_GBps"] = bw.busbw_gbps;
}

// Rank 0 runs in the timed loop; the other ranks run the same number of ops on their threads.
void collective_bench(benchmark::State& state, const CollectiveDescriptor& collective) {
  const int world = static_cast<int>(state.range(0));
  const int64_t size = state.range(1);
  LocalWorld local(world);
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<RankBuffers> buffers;
  for (int r = 0; r < world; ++r) {
    comms.push_back(local.communicator(r));
    buffers.emplace_back(collective.op, size, world);
  }
  const auto iterations = state.max_iterations;
  std::vector<std::thread> peers;
  for (int r = 1; r < world; ++r)
    peers.emplace_back([&, r] {
      comms[r]->barrier()->wait();
      for (benchmark::IterationCount i = 0; i < iterations; ++i)
        buffers[r].issue(*comms[r], collective.op)->wait();
    });
  comms[0]->barrier()->wait();  // every rank is up before timing starts
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) buffers[0].issue(*comms[0], collective.op)->wait();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  for (std::thread& t : peers) t.join();
  set_bandwidth(state, collective, world, size, elapsed.count());
}

void BM_all_gather(benchmark::State& state) { collective_bench(state, kAllGather); }
void BM_reduce_scatter(benchmark::State& state) { collective_bench(state, kReduceScatter); }
void BM_all_reduce(benchmark::State& state) { collective_bench(state, kAllReduce); }

void BM_memcpy(benchmark::State& state) {
  const auto size = static_cast<size_t>(state.range(0));
  std::vector<char> src(size, 1), dst(size, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), size);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(size) * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

BENCHMARK(BM_all_gather)->ArgsProduct({{2, 4, 8}, sizes()})->UseRealTime();
BENCHMARK(BM_reduce_scatter)->ArgsProduct({{2, 4, 8}, sizes()})->UseRealTime();
BENCHMARK(BM_all_reduce)->ArgsProduct({{2, 4, 8}, sizes()})->UseRealTime();
BENCHMARK(BM_memcpy)->ArgsProduct({sizes()})->UseRealTime();

}  // namespace
}  // namespace meshtrain::bench

BENCHMARK_MAIN();

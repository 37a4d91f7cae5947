// Bandwidth of the mpi backend's all_gather, reduce_scatter and all_reduce from 1 KiB to 64 MiB,
// with nccl-tests' algbw and busbw, beside a single-thread memcpy for reference. Runs under
// mpirun (target run_mpi_collectives_bench); every rank runs every collective, only rank 0 reports.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/comm/bus_bandwidth.h"
#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/comm/mpi/mpi_world.h"

namespace meshtrain {
namespace {

constexpr int64_t kMinBytes = int64_t{1} << 10;
constexpr int64_t kMaxBytes = int64_t{64} << 20;

// Fixed by size: Google Benchmark would otherwise pick iterations per rank, and the ranks would
// stop issuing collectives at different points.
int64_t iterations_for(int64_t bytes) {
  return std::clamp<int64_t>((int64_t{256} << 20) / bytes, 3, 200);
}

// bytes is the op's size as nccl-tests counts it: the gathered output of all_gather, the input
// of reduce_scatter, the buffer of all_reduce. Timed per op as its slowest rank saw it.
void run_collective(benchmark::State& state, Communicator& world, Communicator& timing,
                    const bench::CollectiveDescriptor& collective) {
  const int64_t bytes = state.range(0);
  const int w = world.size();
  const int64_t chunk = bytes / static_cast<int64_t>(sizeof(float)) / w;
  const Tensor part = Tensor::zeros({chunk});
  const Tensor full = Tensor::zeros({chunk * w});
  const auto issue = [&] {
    if (collective.op == CommOp::all_gather) return world.all_gather_into(full, part);
    if (collective.op == CommOp::reduce_scatter)
      return world.reduce_scatter_into(part, full, ReduceOp::sum);
    return world.all_reduce(full, ReduceOp::sum);
  };
  issue()->wait();  // first touch of the buffers and MPI's connection setup
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    issue()->wait();
    const double mine =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<double> all = all_gather_values(timing, std::vector<double>{mine});
    const double slowest = *std::max_element(all.begin(), all.end());
    state.SetIterationTime(slowest);
    seconds += slowest;
  }
  const bench::Bandwidth bw = bench::bandwidth(
      collective, w, static_cast<double>(bytes), seconds / static_cast<double>(state.iterations()));
  state.counters["algbw_GBps"] = bw.algbw_gbps;
  state.counters["busbw_GBps"] = bw.busbw_gbps;
  state.counters["ranks"] = w;
}

void run_memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1);
  std::vector<char> dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// Other ranks run the same benchmarks silently.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

void register_benchmarks(Communicator& world, Communicator& timing) {
  const std::string ranks = "/ranks:" + std::to_string(world.size());
  // Rank 0 alone: the others wait in the first collective meanwhile, leaving it the memory bus.
  if (world.rank() == 0)
    benchmark::RegisterBenchmark("memcpy_single_thread", run_memcpy)
        ->RangeMultiplier(4)
        ->Range(kMinBytes, kMaxBytes)
        ->ArgName("bytes")
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (const bench::CollectiveDescriptor* collective :
       {&bench::kAllGather, &bench::kReduceScatter, &bench::kAllReduce}) {
    for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4)
      benchmark::RegisterBenchmark((std::string(collective->name) + ranks).c_str(),
                                   [&world, &timing, collective](benchmark::State& state) {
                                     run_collective(state, world, timing, *collective);
                                   })
          ->Arg(bytes)
          ->ArgName("bytes")
          ->Iterations(iterations_for(bytes))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace meshtrain

int main(int argc, char** argv) {
  try {
    auto world = meshtrain::mpi_world();
    auto timing = meshtrain::mpi_world();  // keeps timing traffic off the measured group
    // Only rank 0 writes --benchmark_out: the others would write the same file.
    std::vector<char*> args(argv, argv + argc);
    if (world->rank() != 0)
      std::erase_if(args, [](const char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
    int count = static_cast<int>(args.size());
    benchmark::Initialize(&count, args.data());
    meshtrain::register_benchmarks(*world, *timing);
    if (world->rank() == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      meshtrain::SilentReporter silent;
      benchmark::RunSpecifiedBenchmarks(&silent);
    }
    benchmark::Shutdown();
    world->barrier()->wait();
  } catch (const std::exception& e) {
    meshtrain::mpi_abort(e.what());
  }
  return 0;
}

// The local backend over CUDA memory: ranks as threads sharing one GPU, every collective and
// point-to-point transfer checked against closed-form values (the host suite's checks with device
// buffers), the ordering of device copies after each rank's queued kernels, offload's host
// crossings, and the refusal to mix host and device buffers otherwise. Every case skips without a
// GPU.
#include <gtest/gtest.h>

#include <tuple>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/core/device_memory.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/comm/collective_checks.h"
#include "tests/support/error_message.h"

namespace meshtrain {
namespace {

#define MT_REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU"

const Device kGpu = Device::cuda(0);

using Params = std::tuple<int, int64_t, DType>;  // world size, elements, dtype

class CudaLocalCollectives : public ::testing::TestWithParam<Params> {};

TEST_P(CudaLocalCollectives, EveryOp) {
  MT_REQUIRE_GPU();
  const auto [world, count, dtype] = GetParam();
  spawn_ranks(
      world,
      [&](RankContext& ctx) {
        Communicator& c = ctx.world;
        testing::check_all_gather(c, count, dtype, kGpu);
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
          testing::check_reduce_scatter(c, count, dtype, op, kGpu);
          testing::check_all_reduce(c, count, dtype, op, kGpu);
        }
        for (int root : {0, c.size() - 1}) testing::check_broadcast(c, count, dtype, root, kGpu);
        testing::check_send_recv_ring(c, count, dtype, kGpu);
        testing::check_all_to_all(c, count, dtype, kGpu);
        testing::check_async_overlap(c, count, dtype, kGpu);
      },
      CommOptions{std::chrono::seconds(20)});
}

std::string name_of(const ::testing::TestParamInfo<Params>& info) {
  return detail::concat("w", std::get<0>(info.param), "_n", std::get<1>(info.param), "_",
                        dtype_name(std::get<2>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Grid, CudaLocalCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values<int64_t>(0, 7, 65536),
                                            ::testing::Values(DType::f32, DType::bf16)),
                         name_of);

// A collective issued right behind a kernel that writes its buffer (no host synchronisation in
// between) must move what the kernel wrote: the copies wait for the issuing stream.
TEST(CudaLocalBackend, CopiesWaitForTheKernelsQueuedBeforeTheOp) {
  MT_REQUIRE_GPU();
  constexpr int64_t n = int64_t{1} << 24;  // long enough for the kernel to still run at issue
  spawn_ranks(4, [&](RankContext& ctx) {
    const float r = static_cast<float>(ctx.rank);
    Tensor buffer = testing::filled(n, DType::f32, kGpu, [&](int64_t) { return r + 1; });
    for (int i = 0; i < 4; ++i) ops::scale(buffer, 2.0f);  // queued, not waited for
    ctx.world.all_reduce(buffer, ReduceOp::sum)->wait();
    testing::expect_values(buffer, [](int64_t) { return 16.0f * (1 + 2 + 3 + 4); }, "all_reduce");

    Tensor gathered = Tensor::empty({4 * n}, DType::f32, kGpu);
    ops::scale(buffer, 0.5f);
    ctx.world.all_gather_into(gathered, buffer)->wait();
    testing::expect_values(gathered, [](int64_t) { return 8.0f * 10; }, "all_gather");
  });
}

// In place, all_to_all stages its input on the progress thread's stream; peers must read the
// staged copy only once it is written (and it, only after the kernels queued before the op).
TEST(CudaLocalBackend, InPlaceAllToAllReadsTheStagedCopy) {
  MT_REQUIRE_GPU();
  constexpr int kWorld = 4;
  constexpr int64_t n = int64_t{1} << 22;  // elements each rank sends each peer
  spawn_ranks(kWorld, [&](RankContext& ctx) {
    const int r = ctx.rank;
    Tensor buffer = testing::filled(kWorld * n, DType::f32, kGpu, [&](int64_t i) {
      return testing::contribution(r, kWorld, i);
    });
    ops::scale(buffer, 2.0f);  // queued, not waited for
    ctx.world.all_to_all(buffer, buffer)->wait();
    testing::expect_values(
        buffer,
        [&](int64_t i) {
          return 2.0f * testing::contribution(static_cast<int>(i / n), kWorld, r * n + i % n);
        },
        "in-place all_to_all");
  });
}

// Offload's crossings: an all-gather reads every rank's input from host memory into GPU outputs,
// a reduce-scatter reduces GPU inputs into host outputs; the copies run on the progress threads'
// streams behind the kernels each rank queued before the op. Ranks spread over the GPUs there are
// (each reduces on its own).
TEST(CudaLocalBackend, CopiesHostInputsInAndHostOutputsOut) {
  MT_REQUIRE_GPU();
  constexpr int kWorld = 4;
  constexpr int64_t n = int64_t{1} << 20;  // elements each rank contributes
  for (const bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    spawn_ranks(kWorld, [&](RankContext& ctx) {
      const int r = ctx.rank;
      const Device gpu = Device::cuda(r % cuda_device_count());
      const auto on_host = [&](const Tensor& t) {
        const Tensor host = pinned ? Tensor::empty_pinned(t.shape(), t.dtype())
                                   : Tensor::empty(t.shape(), t.dtype());
        host.copy_from(t);
        return host;
      };
      const Tensor in = on_host(testing::filled(
          n, DType::f32, [&](int64_t i) { return testing::contribution(r, kWorld, i); }));
      const Tensor gathered = Tensor::zeros({kWorld * n}, DType::f32, gpu);
      ops::scale(gathered, 3.0f);  // queued: the op must overwrite what it writes
      ctx.world.all_gather_into(gathered, in)->wait();
      testing::expect_values(
          gathered,
          [&](int64_t i) { return testing::contribution(static_cast<int>(i / n), kWorld, i % n); },
          "all_gather from the host");

      ops::scale(gathered, 2.0f);  // queued: the reduction must read what it writes
      const Tensor reduced = on_host(Tensor::zeros({n}));
      ctx.world.reduce_scatter_into(reduced, gathered, ReduceOp::sum)->wait();
      EXPECT_EQ(reduced.pinned(), pinned);
      testing::expect_values(
          reduced, [&](int64_t i) { return 2.0f * kWorld * testing::contribution(r, kWorld, i); },
          "reduce_scatter to the host");
    });
  }
}

TEST(CudaLocalBackend, OnlyOffloadCrossingsMixHostAndDeviceBuffers) {
  MT_REQUIRE_GPU();
  spawn_ranks(1, [](RankContext& ctx) {
    const Tensor host = Tensor::zeros({8});
    const Tensor gpu = Tensor::zeros({8}, DType::f32, kGpu);
    testing::expect_error<InvalidArgument>([&] { ctx.world.all_gather_into(host, gpu); },
                                           "in and out must be on one device",
                                           "or in on the host, out on a GPU");
    testing::expect_error<InvalidArgument>(
        [&] { ctx.world.reduce_scatter_into(gpu, host, ReduceOp::sum); },
        "or out on the host, in on a GPU");
    testing::expect_error<InvalidArgument>([&] { ctx.world.all_to_all(gpu, host); },
                                           "in and out must be on one device");
  });
}

TEST(CudaLocalBackend, RanksMustAgreeOnHostOrDeviceMemory) {
  MT_REQUIRE_GPU();
  testing::expect_error<CommError>(
      [] {
        spawn_ranks(2, [](RankContext& ctx) {
          Tensor buffer = Tensor::zeros({16}, DType::f32, ctx.rank == 0 ? Device::cpu() : kGpu);
          ctx.world.all_reduce(buffer, ReduceOp::sum)->wait();
        });
      },
      "collective mismatch", "in CUDA memory");
}

}  // namespace
}  // namespace meshtrain

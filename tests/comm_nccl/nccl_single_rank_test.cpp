// The nccl backend with one rank on GPU 0: every op in closed form, argument checks, Work waits,
// timeouts, split and offload's host crossings. Runs on any machine with a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "meshtrain/core/comm/nccl/nccl_world.h"
#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "tests/comm/collective_checks.h"
#include "tests/comm_nccl/nccl_collective_checks.h"
#include "tests/comm_nccl/nccl_test_support.h"
#include "tests/support/error_message.h"

namespace meshtrain::nccl_test {
namespace {

using namespace std::chrono_literals;

const Device kGpu = Device::cuda(0);

CommOptions short_timeout() { return CommOptions{std::chrono::seconds(30)}; }

class NcclSingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    MESHTRAIN_REQUIRE_GPUS(1);
    comm_ = nccl_world(store_, 0, 1, 0, short_timeout());
  }

  InMemoryStore store_;
  std::unique_ptr<Communicator> comm_;
};

struct OpCase {
  int64_t count;
  DType dtype;
};

class NcclSingleRankOps : public NcclSingleRank, public ::testing::WithParamInterface<OpCase> {};

TEST_P(NcclSingleRankOps, EveryOpGivesItsClosedFormValues) {
  check_every_op(*comm_, kGpu, GetParam().dtype, GetParam().count);
}

INSTANTIATE_TEST_SUITE_P(CountsAndDtypes, NcclSingleRankOps, ::testing::ValuesIn([] {
                           std::vector<OpCase> cases;
                           for (DType dtype : {DType::f32, DType::bf16})
                             for (int64_t count : {0, 1, 7, 1000, 65536})
                               cases.push_back({count, dtype});
                           return cases;
                         }()),
                         [](const auto& info) {
                           return detail::concat(dtype_name(info.param.dtype), "_",
                                                 info.param.count);
                         });

TEST_F(NcclSingleRank, DescribesItself) {
  EXPECT_EQ(comm_->backend_name(), "nccl");
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->world_ranks(), std::vector<int>{0});
  EXPECT_EQ(comm_->exchange_device(), kGpu);
  for (size_t op = 0; op < kNumCommOps; ++op)
    EXPECT_TRUE(comm_->supports(static_cast<CommOp>(op))) << comm_op_name(static_cast<CommOp>(op));
}

TEST_F(NcclSingleRank, ReducesI32) {
  check_all_reduce(*comm_, kGpu, DType::i32, 1000, ReduceOp::sum);
  check_all_reduce(*comm_, kGpu, DType::i32, 1000, ReduceOp::max);
  check_all_gather(*comm_, kGpu, DType::i32, 1000);
}

TEST_F(NcclSingleRank, RejectsHostAndUndefinedBuffers) {
  const Tensor host = Tensor::zeros({8});
  const Tensor gpu = Tensor::zeros({8}, DType::f32, kGpu);
  EXPECT_THROW(comm_->all_reduce(host, ReduceOp::sum), InvalidArgument);
  EXPECT_THROW(comm_->all_reduce(Tensor(), ReduceOp::sum), InvalidArgument);
  EXPECT_THROW(comm_->all_gather_into(host, gpu), InvalidArgument);
  EXPECT_THROW(comm_->all_gather_into(host, host), InvalidArgument);
  EXPECT_THROW(comm_->reduce_scatter_into(gpu, host, ReduceOp::sum), InvalidArgument);
  EXPECT_THROW(comm_->broadcast(host, 0), InvalidArgument);
  EXPECT_THROW(comm_->all_to_all(gpu, host), InvalidArgument);
  try {
    comm_->all_reduce(host, ReduceOp::sum);
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

// Offload's crossings: an all-gather reads its input from pinned host memory, a reduce-scatter
// writes its output there, each copied on the comm stream behind the kernels queued before the op.
// Pageable memory is refused: cudaMemcpyAsync from it would block this thread past every timeout.
TEST_F(NcclSingleRank, CopiesPinnedHostInputsInAndOutputsOut) {
  constexpr int64_t n = int64_t{1} << 22;  // long enough for the queued kernel to still run
  const Tensor host_in = Tensor::empty_pinned({n}, DType::f32);
  host_in.copy_from(testing::filled(n, DType::f32, [](int64_t i) { return i % 7; }));
  const Tensor gathered = Tensor::zeros({n}, DType::f32, kGpu);
  ops::scale(gathered, 3.0f);  // queued before the op, which must overwrite what it writes
  comm_->all_gather_into(gathered, host_in)->wait();
  testing::expect_values(
      gathered, [](int64_t i) { return i % 7; }, "all_gather from the host");

  const Tensor host_out = Tensor::empty_pinned({n}, DType::f32);
  ops::scale(gathered, 2.0f);  // queued: the reduction must read what it writes
  comm_->reduce_scatter_into(host_out, gathered, ReduceOp::sum)->wait();
  testing::expect_values(
      host_out, [](int64_t i) { return 2 * (i % 7); }, "reduce_scatter to the host");

  const Tensor pageable = Tensor::zeros({n});
  testing::expect_error<InvalidArgument>([&] { comm_->all_gather_into(gathered, pageable); },
                                         "all_gather in", "pinned memory only");
  testing::expect_error<InvalidArgument>(
      [&] { comm_->reduce_scatter_into(pageable, gathered, ReduceOp::sum); }, "reduce_scatter out",
      "pinned memory only");
}

TEST_F(NcclSingleRank, RejectsBuffersOnAnotherGpu) {
  MESHTRAIN_REQUIRE_GPUS(2);
  const Tensor other = Tensor::zeros({8}, DType::f32, Device::cuda(1));
  EXPECT_THROW(comm_->all_reduce(other, ReduceOp::sum), InvalidArgument);
}

TEST_F(NcclSingleRank, RejectsPeersOutsideTheGroup) {
  const Tensor gpu = Tensor::zeros({8}, DType::f32, kGpu);
  EXPECT_THROW(comm_->send(gpu, 0), InvalidArgument);  // itself
  EXPECT_THROW(comm_->recv(gpu, 1), InvalidArgument);
  EXPECT_THROW(comm_->broadcast(gpu, 1), InvalidArgument);
}

TEST_F(NcclSingleRank, WorkWaitCompletes) {
  const Tensor buffer =
      filled(65536, DType::f32, kGpu, [](int64_t i) { return contribution(0, i); });
  const WorkPtr work = comm_->all_reduce(buffer, ReduceOp::sum);
  EXPECT_NE(work->description().find("all_reduce"), std::string::npos) << work->description();
  work->wait();
  EXPECT_TRUE(work->is_completed());
  work->wait(1ms);  // waiting again on a completed op returns at once
  EXPECT_TRUE(holds(buffer, [](int64_t i) { return contribution(0, i); }));
}

// The op must read what the caller's stream wrote before it, without any host synchronisation.
TEST_F(NcclSingleRank, OpsSeeWorkQueuedOnTheCallersStream) {
  const int64_t n = 1 << 24;  // a copy long enough to lose a race
  const Tensor source = filled(n, DType::f32, kGpu, [](int64_t i) { return contribution(3, i); });
  Tensor in = Tensor::zeros({n}, DType::f32, kGpu);
  const Tensor out = Tensor::zeros({n}, DType::f32, kGpu);
  device_synchronize(kGpu);
  in.copy_from(source);  // asynchronous on cudaStreamPerThread
  comm_->all_gather_into(out, in)->wait();
  EXPECT_TRUE(holds(out, [](int64_t i) { return contribution(3, i); }));
}

// A host function holds the caller's stream, so the op cannot finish before the deadline.
TEST_F(NcclSingleRank, WaitTimesOutNamingTheOpAndAbortsTheCommunicator) {
  struct Gate {
    std::atomic<bool> open{false};
  } gate;
  const auto hold = [](void* data) {
    const auto give_up = std::chrono::steady_clock::now() + 5s;  // never hang, whatever happens
    while (!static_cast<Gate*>(data)->open.load() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(1ms);
  };
  const Tensor buffer = Tensor::zeros({1024}, DType::f32, kGpu);
  ASSERT_EQ(cudaLaunchHostFunc(cudaStreamPerThread, hold, &gate), cudaSuccess);
  const WorkPtr work = comm_->all_reduce(buffer, ReduceOp::sum);
  EXPECT_FALSE(work->is_completed());
  try {
    work->wait(200ms);
    ADD_FAILURE() << "wait returned while the op could not have run";
  } catch (const Timeout& e) {
    const std::string message = e.what();
    for (const char* part : {"all_reduce", "'world'", "rank 0", "aborted"})
      EXPECT_NE(message.find(part), std::string::npos) << message;
  }
  gate.open = true;
  device_synchronize(kGpu);
  EXPECT_THROW(comm_->barrier(), CommError);
  EXPECT_THROW(work->wait(), CommError);
}

TEST_F(NcclSingleRank, SplitMakesAWorkingGroup) {
  const std::unique_ptr<Communicator> sub = comm_->split(0, 0, "solo");
  EXPECT_EQ(sub->name(), "solo");
  EXPECT_EQ(sub->backend_name(), "nccl");
  EXPECT_EQ(sub->rank(), 0);
  EXPECT_EQ(sub->size(), 1);
  check_all_reduce(*sub, kGpu, DType::f32, 1000, ReduceOp::sum);
  check_all_reduce(*comm_, kGpu, DType::f32, 1000, ReduceOp::sum);  // the parent still works
}

TEST(NcclWorld, RejectsAMissingGpu) {
  InMemoryStore store;
  const int devices = cuda_device_count();
  EXPECT_THROW(nccl_world(store, 0, 1, devices, {}), InvalidArgument);
  EXPECT_THROW(nccl_world(store, 0, 1, -1, {}), InvalidArgument);
  EXPECT_THROW(nccl_world(store, 1, 1, 0, {}), InvalidArgument);
}

TEST(NcclWorld, TimesOutWhenRankZeroNeverPublishes) {
  MESHTRAIN_REQUIRE_GPUS(1);
  InMemoryStore store;
  EXPECT_THROW(nccl_world(store, 1, 2, 0, CommOptions{500ms}), Timeout);
}

TEST(NcclWorld, InitTimesOutWhenAPeerNeverJoins) {
  MESHTRAIN_REQUIRE_GPUS(1);
  InMemoryStore store;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(nccl_world(store, 0, 2, 0, CommOptions{2s}), Timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

}  // namespace
}  // namespace meshtrain::nccl_test

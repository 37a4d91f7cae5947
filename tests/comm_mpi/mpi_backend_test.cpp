// Behaviour particular to the mpi backend: buffers it refuses, in-place layouts MPI forbids,
// bf16 accumulation, splits, concurrent point-to-point, and timeouts that never hang.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/comm/mpi/mpi_world.h"
#include "meshtrain/core/error.h"
#include "tests/comm_mpi/mpi_test_env.h"

namespace meshtrain::mpi_test {
namespace {

using MpiBackend = MpiTest;
using std::chrono::milliseconds;

Tensor filled(int64_t n, float value) {
  return Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), value), {n});
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST_F(MpiBackend, RejectsNonCpuBuffers) {
  const Tensor gpu = Tensor::empty({0}, DType::f32, Device::cuda(0));  // no memory at 0 elements
  EXPECT_THROW(world().all_reduce(gpu, ReduceOp::sum), InvalidArgument);
  EXPECT_NE(error_of([&] { world().broadcast(gpu, 0); }).find("host"), std::string::npos);
}

TEST_F(MpiBackend, RejectsAvgOverI32) {
  const Tensor ints = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_THROW(world().all_reduce(ints, ReduceOp::avg), InvalidArgument);
}

TEST_F(MpiBackend, I32SumAndMax) {
  const int w = world().size();
  const Tensor sum = Tensor::from_vector(std::vector<int32_t>{world().rank(), 1}, {2});
  world().all_reduce(sum, ReduceOp::sum)->wait();
  EXPECT_EQ(sum.data<int32_t>()[0], w * (w - 1) / 2);
  EXPECT_EQ(sum.data<int32_t>()[1], w);
  const Tensor max = Tensor::from_vector(std::vector<int32_t>{-world().rank()}, {1});
  world().all_reduce(max, ReduceOp::max)->wait();
  EXPECT_EQ(max.data<int32_t>()[0], 0);
}

// Rounding after every addition would keep 256 + 1 + 1 + ... at 256; one rounding keeps the sum.
TEST_F(MpiBackend, Bf16SumRoundsOnce) {
  const int w = world().size();
  Tensor bf = Tensor::empty({3}, DType::bf16);
  for (int i = 0; i < 3; ++i) bf.data<BF16>()[i] = to_bf16(world().rank() == 0 ? 256.0f : 1.0f);
  world().all_reduce(bf, ReduceOp::sum)->wait();
  const float expected = to_f32(to_bf16(256.0f + static_cast<float>(w - 1)));
  for (float v : bf.to_vector()) EXPECT_EQ(v, expected);
}

TEST_F(MpiBackend, InPlaceAllGather) {
  const int w = world().size();
  const int64_t n = 5;
  Tensor out = Tensor::zeros({w * n});
  Tensor mine = out.view(world().rank() * n, {n});
  for (int64_t i = 0; i < n; ++i) mine.data<float>()[i] = static_cast<float>(world().rank() * n + i);
  world().all_gather_into(out, mine)->wait();
  const std::vector<float> got = out.to_vector();
  for (int64_t i = 0; i < w * n; ++i) EXPECT_EQ(got[i], static_cast<float>(i));
}

TEST_F(MpiBackend, ReduceScatterIntoOwnChunk) {
  const int w = world().size();
  const int64_t n = 4;
  Tensor in = filled(w * n, 1.0f);
  for (int64_t i = 0; i < w * n; ++i) in.data<float>()[i] = static_cast<float>(i);
  Tensor out = in.view(world().rank() * n, {n});  // aliases in: the backend must stage
  world().reduce_scatter_into(out, in, ReduceOp::avg)->wait();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(out.data<float>()[i], static_cast<float>(world().rank() * n + i));
}

TEST_F(MpiBackend, AllToAllInPlace) {
  const int w = world().size();
  Tensor buffer = filled(w, 0.0f);
  for (int j = 0; j < w; ++j) buffer.data<float>()[j] = static_cast<float>(world().rank() * 100 + j);
  world().all_to_all(buffer, buffer)->wait();
  for (int i = 0; i < w; ++i)
    EXPECT_EQ(buffer.data<float>()[i], static_cast<float>(i * 100 + world().rank()));
}

TEST_F(MpiBackend, SplitByParityOrdersByKey) {
  const int w = world().size();
  const int r = world().rank();
  auto sub = world().split(r % 2, w - r, "parity");  // keys reverse the order
  std::vector<int> expected;
  for (int q = w - 1; q >= 0; --q)
    if (q % 2 == r % 2) expected.push_back(q);
  EXPECT_EQ(sub->world_ranks(), expected);
  EXPECT_EQ(sub->name(), "parity");
  EXPECT_EQ(sub->backend_name(), "mpi");
  Tensor sum = filled(1, static_cast<float>(r));
  sub->all_reduce(sum, ReduceOp::sum)->wait();
  float total = 0;
  for (int q : expected) total += static_cast<float>(q);
  EXPECT_EQ(sum.data<float>()[0], total);
}

// Both directions in flight at once: a send must not wait for the matching recv to be posted
// before the next op starts, or a ring of large messages would deadlock.
TEST_F(MpiBackend, RingExchangeOfLargeMessages) {
  const int w = world().size();
  if (w == 1) GTEST_SKIP() << "needs a peer";
  const int r = world().rank();
  const int64_t n = 1 << 20;  // well past the eager limit
  Tensor out = filled(n, static_cast<float>(r));
  Tensor in = filled(n, -1.0f);
  auto sent = world().send(out, (r + 1) % w);
  auto received = world().recv(in, (r + w - 1) % w);
  sent->wait();
  received->wait();
  EXPECT_EQ(in.data<float>()[0], static_cast<float>((r + w - 1) % w));
  EXPECT_EQ(in.data<float>()[n - 1], static_cast<float>((r + w - 1) % w));
}

// A wait returns at its timeout naming the op, group and rank; the op stays in flight and
// completes once the missing rank joins.
TEST_F(MpiBackend, WaitTimesOutThenOpCompletes) {
  if (world().size() == 1) GTEST_SKIP() << "needs a missing peer";
  const bool late = world().rank() == 0;
  WorkPtr barrier;
  if (!late) {
    barrier = world().barrier();
    const auto start = std::chrono::steady_clock::now();
    const std::string error = error_of([&] { barrier->wait(milliseconds(100)); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    EXPECT_NE(error.find("barrier"), std::string::npos) << error;
    EXPECT_NE(error.find("'world'"), std::string::npos) << error;
    EXPECT_NE(error.find("rank " + std::to_string(world().rank())), std::string::npos) << error;
    EXPECT_FALSE(barrier->is_completed());
  }
  harness_comm().barrier()->wait();  // rank 0 joins only after the others timed out
  if (late) barrier = world().barrier();
  barrier->wait();
  EXPECT_TRUE(barrier->is_completed());
}

// Past CommOptions::timeout the progress thread fails the op and the group refuses further ops
// instead of posting them out of step with its peers.
TEST_F(MpiBackend, ExpiredOpBreaksTheGroup) {
  if (world().size() == 1) GTEST_SKIP() << "needs a missing peer";
  CommOptions options;
  options.timeout = milliseconds(200);
  auto group = mpi_world(options);
  const bool late = group->rank() == 0;
  if (!late) {
    EXPECT_THROW(group->barrier()->wait(std::chrono::seconds(10)), Timeout);
    const std::string error = error_of([&] { group->barrier()->wait(std::chrono::seconds(10)); });
    EXPECT_NE(error.find("unusable"), std::string::npos) << error;
  }
  harness_comm().barrier()->wait();
  // Rank 0's barrier matches the others' expired one, so every rank can free the group cleanly.
  if (late) group->barrier()->wait();
}

}  // namespace
}  // namespace meshtrain::mpi_test

#include "meshtrain/mesh/box_runs.h"

#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

using BoxRun = std::tuple<int64_t, int64_t, int64_t>;

std::vector<BoxRun> runs_of(const Shape& shape, const TensorSlice& box) {
  std::vector<BoxRun> runs;
  for_each_box_run(shape, box, [&](int64_t at, int64_t in_box, int64_t n) {
    runs.emplace_back(at, in_box, n);
  });
  return runs;
}

TEST(BoxRuns, RowSliceIsOneRun) {
  EXPECT_EQ(runs_of({6, 4}, {{2, 0}, {3, 4}}), (std::vector<BoxRun>{{8, 0, 12}}));
}

TEST(BoxRuns, ColumnSliceIsOneRunPerRow) {
  EXPECT_EQ(runs_of({3, 5}, {{0, 1}, {3, 2}}),
            (std::vector<BoxRun>{{1, 0, 2}, {6, 2, 2}, {11, 4, 2}}));
}

TEST(BoxRuns, ThreeDimsMergeTheWholeTrailingDims) {
  // [2, 3, 4]: rows 1..2 of dim 1, all of dim 2, both of dim 0 -> two runs of 8.
  EXPECT_EQ(runs_of({2, 3, 4}, {{0, 1, 0}, {2, 2, 4}}),
            (std::vector<BoxRun>{{4, 0, 8}, {16, 8, 8}}));
}

TEST(BoxRuns, EmptyBoxHasNoRunsAndScalarOne) {
  EXPECT_TRUE(runs_of({4, 4}, {{4, 0}, {0, 4}}).empty());
  EXPECT_EQ(runs_of({}, {{}, {}}), (std::vector<BoxRun>{{0, 0, 1}}));
}

TEST(BoxRuns, BoxOutsideTheTensorIsRefused) {
  EXPECT_THROW(runs_of({4, 4}, {{3, 0}, {2, 4}}), InvalidArgument);
  EXPECT_THROW(runs_of({4, 4}, {{0}, {2}}), InvalidArgument);
}

TEST(BoxRuns, IntersectionOfBoxes) {
  EXPECT_EQ(intersect({{0, 2}, {4, 4}}, {{2, 0}, {4, 3}}), (TensorSlice{{2, 2}, {2, 1}}));
  EXPECT_TRUE(box_empty(intersect({{0, 0}, {2, 2}}, {{2, 0}, {2, 2}})));
}

TEST(BoxRuns, FillFromBoxesAssemblesPiecesAtTheirLocalOffsets) {
  // A [4, 6] global tensor with values 0..23; the local tensor is columns 0..1 and 4..5 side by
  // side (a blocked shard), read box by box from a reader that slices the global.
  std::vector<float> global(24);
  std::iota(global.begin(), global.end(), 0.f);
  const std::vector<LocalPiece> pieces = {{{{0, 0}, {4, 2}}, {0, 0}}, {{{0, 4}, {4, 2}}, {0, 2}}};
  const Tensor local = Tensor::empty({4, 4});
  fill_from_boxes(local, pieces, [&](const TensorSlice& box, const Tensor& out) {
    float* dst = out.data<float>();
    for_each_box_run({4, 6}, box, [&](int64_t at, int64_t in_box, int64_t n) {
      std::copy_n(global.data() + at, n, dst + in_box);
    });
  });
  EXPECT_EQ(local.to_vector(),
            (std::vector<float>{0, 1, 4, 5, 6, 7, 10, 11, 12, 13, 16, 17, 18, 19, 22, 23}));
}

}  // namespace
}  // namespace meshtrain

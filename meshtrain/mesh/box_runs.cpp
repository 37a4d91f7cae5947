#include "meshtrain/mesh/box_runs.h"

#include <algorithm>

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_copy.h"

namespace meshtrain {

void for_each_box_run(const Shape& shape, const TensorSlice& box,
                      const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const size_t rank = shape.size();
  MT_CHECK(box.offset.size() == rank && box.shape.size() == rank, "box ", shape_string(box.offset),
           " + ", shape_string(box.shape), " does not match a tensor of shape ",
           shape_string(shape));
  for (size_t d = 0; d < rank; ++d)
    MT_CHECK(box.offset[d] >= 0 && box.shape[d] >= 0 && box.offset[d] + box.shape[d] <= shape[d],
             "box ", shape_string(box.offset), " + ", shape_string(box.shape),
             " leaves a tensor of shape ", shape_string(shape));
  if (shape_numel(box.shape) == 0) return;
  // The run: the innermost dims the box covers whole, plus the first one it cuts.
  size_t first_run_dim = rank;
  int64_t run = 1;
  while (first_run_dim > 0) {
    --first_run_dim;
    run *= box.shape[first_run_dim];
    if (box.shape[first_run_dim] != shape[first_run_dim]) break;
  }
  if (rank == 0) run = 1;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  // Odometer over the dims outside the run.
  std::vector<int64_t> index(first_run_dim, 0);
  const int64_t runs = rank == 0 ? 1 : shape_numel(box.shape) / run;
  for (int64_t r = 0; r < runs; ++r) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d)
      offset += (box.offset[d] + (d < first_run_dim ? index[d] : 0)) * strides[d];
    fn(offset, r * run, run);
    for (size_t d = first_run_dim; d-- > 0;) {
      if (++index[d] < box.shape[d]) break;
      index[d] = 0;
    }
  }
}

TensorSlice intersect(const TensorSlice& a, const TensorSlice& b) {
  MT_ASSERT_EQ(a.offset.size(), b.offset.size(), "intersect: boxes of different ranks");
  TensorSlice out{a.offset, a.shape};
  for (size_t d = 0; d < a.offset.size(); ++d) {
    const int64_t begin = std::max(a.offset[d], b.offset[d]);
    const int64_t end = std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    out.offset[d] = begin;
    out.shape[d] = std::max<int64_t>(0, end - begin);
  }
  return out;
}

bool box_empty(const TensorSlice& box) { return shape_numel(box.shape) == 0; }

void fill_from_boxes(const Tensor& local, const std::vector<LocalPiece>& pieces,
                     const BoxReader& read) {
  MT_CHECK(local.device().is_cpu(), "fill_from_boxes: the local tensor must be on the host");
  int64_t covered = 0;
  for (const LocalPiece& piece : pieces) covered += shape_numel(piece.global.shape);
  MT_ASSERT_EQ(covered, local.numel(), "fill_from_boxes: the pieces do not tile the local tensor");
  const bool one_whole_piece = pieces.size() == 1 && pieces[0].global.shape == local.shape();
  if (one_whole_piece) {
    read(pieces[0].global, local);
    return;
  }
  for (const LocalPiece& piece : pieces) {
    const Tensor box = Tensor::empty(piece.global.shape, local.dtype());
    read(piece.global, box);
    copy_box(local, piece.local_offset, box, Shape(piece.global.shape.size(), 0),
             piece.global.shape);
  }
}

}  // namespace meshtrain

#include "meshtrain/mesh/box_copy.h"

#include <cstring>

#include "meshtrain/core/error.h"

namespace meshtrain {

namespace {

Shape strides_of(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

void check_inside(const Tensor& t, const Shape& offset, const Shape& extent, const char* what) {
  MT_CHECK(offset.size() == extent.size() && static_cast<int>(offset.size()) == t.ndim(),
           "copy_box: the ", what, " box at ", shape_string(offset), " of extent ",
           shape_string(extent), " must have one entry per dim of ", t.describe());
  for (size_t d = 0; d < offset.size(); ++d)
    MT_CHECK(offset[d] >= 0 && extent[d] >= 0 && offset[d] + extent[d] <= t.shape()[d],
             "copy_box: ", what, " box [", offset[d], ", ", offset[d] + extent[d], ") of dim ", d,
             " exceeds ", t.describe());
}

}  // namespace

void copy_box(const Tensor& dst, const Shape& dst_offset, const Tensor& src,
              const Shape& src_offset, const Shape& extent) {
  MT_CHECK(dst.dtype() == src.dtype(), "copy_box: dtypes differ (", dst.describe(), " vs ",
           src.describe(), ")");
  MT_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "copy_box: host tensors only (",
           dst.describe(), ", ", src.describe(), ")");
  check_inside(dst, dst_offset, extent, "destination");
  check_inside(src, src_offset, extent, "source");
  if (shape_numel(extent) == 0) return;

  const size_t elem = dtype_size(src.dtype());
  const Shape ds = strides_of(dst.shape()), ss = strides_of(src.shape());
  const int nd = static_cast<int>(extent.size());
  // Runs of the innermost dim are contiguous in both; walk the outer dims like an odometer.
  const size_t run = nd == 0 ? elem : static_cast<size_t>(extent[nd - 1]) * elem;
  auto* d = static_cast<char*>(dst.raw_data());
  const auto* s = static_cast<const char*>(src.raw_data());
  Shape index(nd > 0 ? nd - 1 : 0, 0);
  while (true) {
    int64_t di = 0, si = 0;
    for (int k = 0; k < nd; ++k) {
      const int64_t i = k < nd - 1 ? index[k] : 0;
      di += (dst_offset[k] + i) * ds[k];
      si += (src_offset[k] + i) * ss[k];
    }
    std::memcpy(d + di * elem, s + si * elem, run);
    int k = nd - 2;
    for (; k >= 0; --k) {
      if (++index[k] < extent[k]) break;
      index[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace meshtrain

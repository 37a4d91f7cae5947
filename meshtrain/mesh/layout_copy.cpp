#include "meshtrain/mesh/layout_copy.h"

#include "meshtrain/core/error.h"
#include "meshtrain/mesh/box_copy.h"

namespace meshtrain {

namespace {

// Checks up front what copy_box would otherwise report box by box, in the caller's words: pieces
// computed for another tensor, layout or rank must fail with a message that says so.
void check_pieces(const char* what, const Tensor& local, const Tensor& global,
                  const std::vector<LocalPiece>& pieces) {
  MT_CHECK(local.dtype() == global.dtype(), what, ": dtypes differ (local ", local.describe(),
           ", global ", global.describe(), ")");
  MT_CHECK(local.ndim() == global.ndim(), what, ": local ", local.describe(), " and global ",
           global.describe(), " have different ranks");
  int64_t covered = 0;
  for (const LocalPiece& p : pieces) {
    const auto describe = [&] {
      return detail::concat("piece at global ", shape_string(p.global.offset), " of shape ",
                            shape_string(p.global.shape), ", local offset ",
                            shape_string(p.local_offset));
    };
    const size_t n = global.shape().size();
    MT_CHECK(p.global.offset.size() == n && p.global.shape.size() == n &&
                 p.local_offset.size() == n,
             what, ": ", describe(), " does not match the rank of global ", global.describe());
    for (size_t d = 0; d < n; ++d) {
      const int64_t global_end = p.global.offset[d] + p.global.shape[d];
      const int64_t local_end = p.local_offset[d] + p.global.shape[d];
      MT_CHECK(p.global.offset[d] >= 0 && p.global.shape[d] >= 0 && global_end <= global.shape()[d],
               what, ": ", describe(), " falls outside global ", global.describe());
      MT_CHECK(p.local_offset[d] >= 0 && local_end <= local.shape()[d], what, ": ", describe(),
               " falls outside local ", local.describe());
    }
    covered += shape_numel(p.global.shape);
  }
  // Pieces from Layout::local_pieces tile the local tensor, so their sizes add up to it.
  MT_CHECK(covered == local.numel(), what, ": the pieces hold ", covered,
           " elements but local ", local.describe(), " has ", local.numel(),
           "; were they computed for this tensor's layout and rank?");
}

}  // namespace

void copy_global_to_local(const Tensor& local, const Tensor& global,
                          const std::vector<LocalPiece>& pieces) {
  check_pieces("copy_global_to_local", local, global, pieces);
  for (const LocalPiece& p : pieces)
    copy_box(local, p.local_offset, global, p.global.offset, p.global.shape);
}

void copy_local_to_global(const Tensor& global, const Tensor& local,
                          const std::vector<LocalPiece>& pieces) {
  check_pieces("copy_local_to_global", local, global, pieces);
  for (const LocalPiece& p : pieces)
    copy_box(global, p.global.offset, local, p.local_offset, p.global.shape);
}

}  // namespace meshtrain

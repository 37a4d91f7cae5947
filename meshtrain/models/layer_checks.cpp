#include "meshtrain/models/layer_checks.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

std::pair<int64_t, int64_t> batch_and_seq(const MicroBatch& mb, const std::string& layer) {
  MT_CHECK(mb.tokens.defined() && mb.tokens.ndim() == 2, layer, ": mb.tokens must be [b, T], got ",
           mb.tokens.defined() ? mb.tokens.describe() : "undefined");
  return {mb.tokens.dim(0), mb.tokens.dim(1)};
}

void expect_hidden(const Tensor& hidden, const std::string& layer, const char* what) {
  MT_CHECK(hidden.defined() && hidden.ndim() == 2, layer, ": mb.hidden must be ", what,
           " [rows, d], got ", hidden.defined() ? hidden.describe() : "undefined");
}

Shape token_rows(const MicroBatch& mb, const nn::TensorParallel& tp, int64_t width,
                 const std::string& layer) {
  const auto [batch, seq] = batch_and_seq(mb, layer);
  return {tp.local_rows(batch * seq).size, width};
}

std::vector<Parameter*> concat(std::initializer_list<std::vector<Parameter*>> lists) {
  std::vector<Parameter*> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace meshtrain

#include "parallel/micro_batch.h"

#include "core/error.h"

namespace meshtrain {

std::vector<Tensor> MicroBatch::take(int stage) {
  auto it = saved.find(stage);
  MT_CHECK(it != saved.end(), "stage ", stage, " runs backward without a saved forward");
  std::vector<Tensor> tensors = std::move(it->second);
  saved.erase(it);
  return tensors;
}

}  // namespace meshtrain

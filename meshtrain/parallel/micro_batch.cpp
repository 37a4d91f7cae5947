#include "meshtrain/parallel/micro_batch.h"

#include "meshtrain/core/error.h"

namespace meshtrain {

Tensor Tape::pop() {
  MT_CHECK(!tensors_.empty(), "backward pops more tensors than its forward saved");
  Tensor t = std::move(tensors_.back());
  tensors_.pop_back();
  return t;
}

Tape MicroBatch::take(int layer) {
  auto it = saved.find(layer);
  MT_CHECK(it != saved.end(), "layer ", layer, " runs backward without a saved forward");
  Tape tape = std::move(it->second);
  saved.erase(it);
  return tape;
}

Tape MicroBatch::take_deferred(int layer) {
  auto it = deferred.find(layer);
  MT_CHECK(it != deferred.end(), "layer ", layer,
           " runs its weight backward without its input backward");
  Tape tape = std::move(it->second);
  deferred.erase(it);
  return tape;
}

}  // namespace meshtrain

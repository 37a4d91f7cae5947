// MicroBatch: what flows through a model's stages for one micro-batch on one rank. Forward fills
// `hidden` stage by stage; backward carries the gradient of `hidden` back. Each stage keeps what its
// backward needs in `saved`, keyed by the stage's index, so several micro-batches can be in flight
// (pipeline schedules) without stages holding per-micro-batch state themselves.
#pragma once

#include <map>
#include <vector>

#include "core/tensor.h"

namespace meshtrain {

struct MicroBatch {
  Tensor tokens;   // i32 [b, T]: this rank's sequences
  Tensor targets;  // i32 [b, T]: tokens shifted by one
  Tensor hidden;   // forward: the activation between stages; backward: its gradient
  double loss_sum = 0.0;   // sum of this rank's per-token losses
  float loss_scale = 0.f;  // d(loss)/d(token loss) = 1 / tokens in the global batch
  std::map<int, std::vector<Tensor>> saved;

  void save(int stage, std::vector<Tensor> tensors) { saved[stage] = std::move(tensors); }
  // Hands the saved tensors to backward and forgets them, freeing activations as backward goes.
  std::vector<Tensor> take(int stage);
};

}  // namespace meshtrain

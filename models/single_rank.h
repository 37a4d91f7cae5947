// The single-rank path: the whole model on one rank with no strategy (tests, sampling and a plain
// CPU run). Under a strategy, the engine in parallel/ does these steps instead.
#pragma once

#include <vector>

#include "parallel/model.h"
#include "parallel/optimizer_slot.h"

namespace meshtrain {

// Zeroes the gradient of every trainable parameter.
void zero_grad(Model& model);
// One slot per trainable parameter, sharing its value and gradient tensors (f32).
std::vector<OptimizerSlot> parameter_slots(Model& model);
// Runs every stage forward and returns the mean token loss (the batch is the global batch); saved
// activations stay in mb for backward.
double forward(Model& model, MicroBatch& mb);
// Sets mb.loss_scale = 1 / tokens and runs every stage backward, accumulating into the gradients.
void backward(Model& model, MicroBatch& mb);

}  // namespace meshtrain

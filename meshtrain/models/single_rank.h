// The single-rank path: the whole model on one rank with no strategy (the reference the parallel
// layouts are checked against), through the engine with no hooks.
#pragma once

#include <vector>

#include "meshtrain/parallel/model.h"
#include "meshtrain/parallel/optimizer_slot.h"

namespace meshtrain {

// Zeroes the gradient of every trainable parameter.
void zero_grad(Model& model);
// One slot per trainable parameter, sharing its value and gradient tensors (f32).
std::vector<OptimizerSlot> parameter_slots(Model& model);
// Runs every layer forward and returns the mean token loss (the batch is the global batch); saved
// activations stay in mb for backward.
double forward(Model& model, MicroBatch& mb);
// Sets mb.loss_scale = 1 / tokens and runs every layer backward, accumulating into the gradients.
void backward(Model& model, MicroBatch& mb);

}  // namespace meshtrain

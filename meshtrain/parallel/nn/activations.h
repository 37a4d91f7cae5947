// Small helpers the building blocks share for allocating activations beside their parameters.
#pragma once

#include "meshtrain/core/tensor.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain::nn {

// Where backward accumulates a parameter's gradient: its grad, or for a frozen parameter a
// zeroed scratch tensor that is dropped (for kernels that always write one, like LayerNorm's).
Tensor grad_target(const Parameter& param);
// Its grad, or undefined for a frozen (or absent) parameter: the kernel skips that gradient.
Tensor grad_or_none(const Parameter* param);

// An activation shaped like `shape`, with the dtype and device of `like` (a parameter's value),
// so that compute follows wherever the strategy put the parameters.
Tensor activation_like(const Tensor& like, const Shape& shape);
Tensor f32_like(const Tensor& like, const Shape& shape);  // statistics, probabilities, losses

// `tokens` on the device of `like` (a no-op when already there).
Tensor on_device_of(const Tensor& like, const Tensor& tokens);

// Checks host ids against the global vocabulary [0, vocab) (the kernels take any id, since ids
// outside a rank's vocabulary slice are legal); `what` starts the message.
void check_token_ids(const Tensor& ids, int64_t vocab, const char* what);

}  // namespace meshtrain::nn

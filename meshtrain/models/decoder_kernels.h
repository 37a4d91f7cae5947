// What the key/value-cache decoders (gpt2_decoder.h, llama_decoder.h) share: reading a whole
// model's values onto the host, and the causal softmax of one row of attention scores.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshtrain/core/tensor.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain {

// The parameter's value as an f32 host tensor: shared on the CPU, copied from an accelerator.
// InvalidArgument naming `decoder` and the parameter when it has no value on this rank, is sharded
// or is not f32.
Tensor decoder_host_value(const Parameter& p, std::string_view decoder);

// In place over one row of `count` scores: the softmax over the first `seen` keys, and zero for the
// rest (the positions after this row's).
void causal_softmax_row(float* row, int64_t seen, int64_t count);

}  // namespace meshtrain

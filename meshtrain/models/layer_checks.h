// What the layers of the built-in families share: reading a micro-batch's shape, checking the
// hidden state a layer receives, and the rows of it this rank holds.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/tensor_parallel.h"
#include "meshtrain/parallel/parameter.h"

namespace meshtrain {

// The micro-batch's sequences and their length, from its tokens [b, T].
std::pair<int64_t, int64_t> batch_and_seq(const MicroBatch& mb, const std::string& layer);
// InvalidArgument unless `hidden` is [rows, d]; `what` says which ("the input").
void expect_hidden(const Tensor& hidden, const std::string& layer, const char* what);
// [this rank's token rows of mb, width]: all rows, or its share under sequence parallelism.
Shape token_rows(const MicroBatch& mb, const nn::TensorParallel& tp, int64_t width,
                 const std::string& layer);
std::vector<Parameter*> concat(std::initializer_list<std::vector<Parameter*>> lists);

}  // namespace meshtrain

#include "meshtrain/models/token_batches.h"

#include <algorithm>

#include "meshtrain/core/error.h"

namespace meshtrain {

MicroBatch TokenBatch::micro_batch() const {
  MicroBatch mb;
  mb.tokens = tokens;
  mb.targets = targets;
  return mb;
}

TokenBatches::TokenBatches(std::vector<Token> tokens, int64_t vocab, int64_t global_batch,
                           int64_t seq_len, int64_t dp_degree, int64_t dp_rank)
    : tokens_(std::move(tokens)),
      batch_(global_batch),
      seq_(seq_len),
      dp_degree_(dp_degree),
      dp_rank_(dp_rank) {
  MT_CHECK(global_batch >= 1 && seq_len >= 1,
           "TokenBatches: batch and sequence length must be >= 1, got B = ", global_batch,
           ", T = ", seq_len);
  MT_CHECK(dp_degree >= 1 && global_batch % dp_degree == 0,
           "TokenBatches: the global batch B = ", global_batch,
           " must divide evenly over the data-parallel degree D = ", dp_degree);
  MT_CHECK(dp_rank >= 0 && dp_rank < dp_degree, "TokenBatches: data rank ", dp_rank,
           " outside [0, ", dp_degree, ")");
  MT_CHECK(num_tokens() > seq_len, "TokenBatches: sequences of T = ", seq_len, " need at least ",
           seq_len + 1, " tokens (inputs and targets), the data has ", num_tokens());
  const Token max = *std::max_element(tokens_.begin(), tokens_.end());
  MT_CHECK(static_cast<int64_t>(max) < vocab, "TokenBatches: the data holds token ", max,
           " but the model's vocabulary is ", vocab);
}

TokenBatches TokenBatches::shape_only(int64_t global_batch, int64_t seq_len, int64_t dp_degree,
                                      int64_t dp_rank) {
  MT_CHECK(global_batch >= 1 && seq_len >= 1 && dp_degree >= 1 && global_batch % dp_degree == 0 &&
               dp_rank >= 0 && dp_rank < dp_degree,
           "TokenBatches::shape_only: B = ", global_batch, ", T = ", seq_len,
           " over D = ", dp_degree, " (rank ", dp_rank, "): B, T >= 1 and D dividing B expected");
  TokenBatches batches;
  batches.batch_ = global_batch;
  batches.seq_ = seq_len;
  batches.dp_degree_ = dp_degree;
  batches.dp_rank_ = dp_rank;
  return batches;
}

TokenBatch TokenBatches::batch(int64_t step) const {
  MT_CHECK(step >= 0, "TokenBatches::batch: steps count from 0, got ", step);
  if (tokens_.empty()) {
    MemoryCategoryScope scope(MemoryCategory::activation);
    const Shape shape{local_batch(), seq_};
    return {Tensor::empty(shape, DType::i32, Device::meta()),
            Tensor::empty(shape, DType::i32, Device::meta())};
  }
  const int64_t local = local_batch(), n = num_tokens();
  std::vector<int32_t> tokens(static_cast<size_t>(local * seq_)), targets(tokens.size());
  for (int64_t i = 0; i < local; ++i) {
    const int64_t start = sequence_offset(step, dp_rank_ * local + i) % n;
    for (int64_t t = 0; t < seq_; ++t) {
      // Every token is below the vocabulary (checked above), so it fits the i32 of the tensors.
      tokens[i * seq_ + t] = static_cast<int32_t>(tokens_[(start + t) % n]);
      targets[i * seq_ + t] = static_cast<int32_t>(tokens_[(start + t + 1) % n]);
    }
  }
  MemoryCategoryScope scope(MemoryCategory::activation);
  return {Tensor::from_vector(tokens, {local, seq_}), Tensor::from_vector(targets, {local, seq_})};
}

}  // namespace meshtrain

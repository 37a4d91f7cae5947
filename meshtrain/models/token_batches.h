// Deterministic batches from a token sequence. At step s, with a global batch of B sequences of
// length T, global sequence b (0 <= b < B) reads its tokens from position ((s * B) + b) * T of the
// file and its targets one position later, every position taken modulo the token count (so reading
// wraps around at the end). With data-parallel degree D, data rank r takes global sequences
// r * B / D ... (r + 1) * B / D - 1. Every rank computes its part without communication, and the
// union over ranks is exactly the single-rank batch.
#pragma once

#include <cstdint>
#include <vector>

#include "meshtrain/core/tensor.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/parallel/micro_batch.h"

namespace meshtrain {

struct TokenBatch {
  Tensor tokens;                   // i32 [B / D, T]
  Tensor targets;                  // i32 [B / D, T]
  MicroBatch micro_batch() const;  // a fresh micro-batch over these sequences
};

class TokenBatches {
 public:
  // InvalidArgument when D does not divide B, r is outside [0, D), or the sequence (T + 1 tokens
  // with its last target) is longer than the data; also when a token is >= vocab.
  TokenBatches(std::vector<Token> tokens, int64_t vocab, int64_t global_batch, int64_t seq_len,
               int64_t dp_degree = 1, int64_t dp_rank = 0);
  // Batches of the same shapes on shape-only tensors (Device::meta), for a dry run: no data.
  static TokenBatches shape_only(int64_t global_batch, int64_t seq_len, int64_t dp_degree,
                                 int64_t dp_rank);

  TokenBatch batch(int64_t step) const;
  // Where global sequence b of step s starts in the token sequence (before wrapping).
  int64_t sequence_offset(int64_t step, int64_t b) const { return (step * batch_ + b) * seq_; }
  int64_t local_batch() const { return batch_ / dp_degree_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  TokenBatches() = default;

  std::vector<Token> tokens_;  // empty: shape-only

  int64_t batch_ = 0, seq_ = 0, dp_degree_ = 1, dp_rank_ = 0;
};

}  // namespace meshtrain

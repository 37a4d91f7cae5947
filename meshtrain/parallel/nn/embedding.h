// Token and position embeddings.
//
// Embedding (style `vocab`, Megatron's vocab-parallel embedding): each tp rank holds a contiguous
// range of the vocabulary's rows (ceil-div chunks, so a vocabulary that does not divide by tp
// needs no padding rows: the last ranks hold fewer); ids outside a rank's range give zeros and the
// partial rows are summed over tp (reduce-scattered to each rank's rows under sequence parallelism).
// PositionEmbedding (style `sequence`): adds wpe to the rows this rank holds.
#pragma once

#include "meshtrain/parallel/micro_batch.h"
#include "meshtrain/parallel/nn/module.h"

namespace meshtrain::nn {

class Embedding : public Module {
 public:
  explicit Embedding(Parameter* table) : table_(table) {}
  std::vector<Parameter*> parameters() override { return {table_}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;
  const TensorParallel& tp() const { return tp_; }

  // ids i32 [rows] (every id in the global vocabulary) -> [this rank's rows, C].
  Tensor forward(const Tensor& ids, Tape& tape);
  void backward(const Tensor& d_y, Tape& tape);

 private:
  Parameter* table_;
  int64_t vocab_start_ = 0;  // the first global row this rank holds
  TensorParallel tp_;
};

// InvalidArgument when splitting a [V, C] table's rows over tp leaves a rank none.
void check_vocabulary_split(const Parameter& table, int tp);
// Shards a [V, C] table's vocabulary rows over tp (the embedding and the tied LM head share it) and
// returns the first global row this rank holds.
int64_t shard_vocabulary(Parameter& table, const TpSetup& setup);

class PositionEmbedding : public Module {
 public:
  explicit PositionEmbedding(Parameter* table) : table_(table) {}
  std::vector<Parameter*> parameters() override { return {table_}; }
  void check_parallel(TpStyle style, int tp) const override;
  void parallelize(TpStyle style, const TpSetup& setup) override;
  const TensorParallel& tp() const { return tp_; }

  // hidden [local rows, C] += wpe[position of each row], the rows being rows
  // [first_row, first_row + local rows) of sequences of `seq` tokens laid end to end.
  void forward(const Tensor& hidden, int64_t first_row, int64_t seq);
  // wpe's gradient from the same rows (summed over tp when they are a sequence-parallel share).
  void backward(const Tensor& d_hidden, int64_t first_row, int64_t seq);

 private:
  // Calls fn(position, row, count) for each run of consecutive positions.
  template <typename Fn>
  static void for_each_run(int64_t first_row, int64_t rows, int64_t seq, Fn&& fn);

  Parameter* table_;
  TensorParallel tp_;
};

}  // namespace meshtrain::nn

#include "meshtrain/parallel/nn/embedding.h"

#include "meshtrain/core/error.h"
#include "meshtrain/core/ops/ops.h"
#include "meshtrain/parallel/nn/activations.h"

namespace meshtrain::nn {

void check_vocabulary_split(const Parameter& table, int tp) {
  const int64_t vocab = table.global_shape()[0];
  if (shard_range(vocab, tp, tp - 1).size == 0)
    throw InvalidArgument(detail::concat(
        "tensor parallelism splits the vocabulary (", vocab, " rows) over tp=", tp,
        " in slices of ", (vocab + tp - 1) / tp,
        " rows, which leaves the last tp rank none; pad the vocabulary to a multiple of tp (as "
        "Megatron-LM's --make-vocab-size-divisible-by does) or use a smaller tp"));
}

int64_t shard_vocabulary(Parameter& table, const TpSetup& setup) {
  check_vocabulary_split(table, setup.tp.size());
  shard_on_tp(table, Shard{0}, setup);
  return shard_range(table.global_shape()[0], setup.tp.size(), setup.tp.rank()).offset;
}

void Embedding::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::vocab) Module::check_parallel(style, tp);
  check_vocabulary_split(*table_, tp);
}

void Embedding::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  vocab_start_ = shard_vocabulary(*table_, setup);
  tp_ = setup.tp;
}

Tensor Embedding::forward(const Tensor& ids, Tape& tape) {
  const Tensor& table = table_->value();
  MT_CHECK(ids.defined() && ids.ndim() == 1 && ids.dtype() == DType::i32,
           "embedding: ids must be i32 [rows], got ", ids.defined() ? ids.describe() : "undefined");
  check_token_ids(ids, table_->global_shape()[0], "embedding: token id");
  const Tensor on_device = on_device_of(table, ids);
  Tensor partial = activation_like(table, {ids.numel(), table.dim(1)});
  ops::embedding_forward(partial, on_device, table, vocab_start_);
  tape.push(on_device);
  return tp_.leave(partial);
}

void Embedding::backward(const Tensor& d_y, Tape& tape) {
  const Tensor ids = tape.pop();
  const Tensor d_all = tp_.leave_backward(d_y);
  if (table_->requires_grad()) ops::embedding_backward(table_->grad(), d_all, ids, vocab_start_);
}

void PositionEmbedding::check_parallel(TpStyle style, int tp) const {
  if (style != TpStyle::sequence) Module::check_parallel(style, tp);
}

void PositionEmbedding::parallelize(TpStyle style, const TpSetup& setup) {
  check_parallel(style, setup.tp.size());
  tp_ = setup.tp;
}

template <typename Fn>
void PositionEmbedding::for_each_run(int64_t first_row, int64_t rows, int64_t seq, Fn&& fn) {
  for (int64_t row = 0; row < rows;) {
    const int64_t position = (first_row + row) % seq;
    const int64_t count = std::min(seq - position, rows - row);
    fn(position, row, count);
    row += count;
  }
}

void PositionEmbedding::forward(const Tensor& hidden, int64_t first_row, int64_t seq) {
  const Tensor& table = table_->value();
  MT_CHECK(seq <= table.dim(0), "embedding: sequences of ", seq,
           " tokens exceed the context length ", table.dim(0));
  const int64_t c = table.dim(1);
  for_each_run(first_row, hidden.dim(0), seq, [&](int64_t position, int64_t row, int64_t count) {
    const Tensor rows = hidden.view(row * c, {count, c});
    ops::add(rows, rows, table.rows(position, count));
  });
}

void PositionEmbedding::backward(const Tensor& d_hidden, int64_t first_row, int64_t seq) {
  if (!table_->requires_grad()) return;
  const int64_t c = d_hidden.dim(1);
  const Tensor grad = table_->grad().rows(0, seq);
  // Under sequence parallelism this rank saw some rows only: sum their gradient over tp.
  const Tensor target =
      tp_.splits_rows() ? Tensor::zeros(grad.shape(), grad.dtype(), grad.device()) : grad;
  for_each_run(first_row, d_hidden.dim(0), seq, [&](int64_t position, int64_t row, int64_t count) {
    ops::axpy(target.rows(position, count), 1.f, d_hidden.view(row * c, {count, c}));
  });
  if (tp_.splits_rows()) {
    tp_.all_reduce(target);
    ops::axpy(grad, 1.f, target);
  }
}

}  // namespace meshtrain::nn

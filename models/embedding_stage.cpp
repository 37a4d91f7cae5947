#include "models/embedding_stage.h"

#include "core/error.h"
#include "core/ops/ops.h"
#include "models/stage_tensors.h"

namespace meshtrain {

void EmbeddingStage::forward(MicroBatch& mb, int stage_index) {
  MemoryCategoryScope scope(MemoryCategory::activation);
  const Tensor& wte = wte_->value();
  const Tensor& wpe = wpe_->value();
  MT_CHECK(mb.tokens.defined() && mb.tokens.ndim() == 2 && mb.tokens.dtype() == DType::i32,
           "embedding: mb.tokens must be i32 [b, T], got ",
           mb.tokens.defined() ? mb.tokens.describe() : "undefined");
  const int64_t batch = mb.tokens.dim(0), seq = mb.tokens.dim(1), dim = wte.dim(1);
  MT_CHECK(seq <= wpe.dim(0), "embedding: sequences of ", seq, " tokens exceed the context length ",
           wpe.dim(0));
  const Tensor ids = on_device_of(wte, mb.tokens).flatten();
  Tensor hidden = activation_like(wte, {batch, seq, dim});
  ops::embedding_forward(hidden.reshape({batch * seq, dim}), ids, wte);
  const Tensor positions = wpe.rows(0, seq);
  for (int64_t b = 0; b < batch; ++b) {
    const Tensor row = hidden.view(b * seq * dim, {seq, dim});
    ops::add(row, row, positions);
  }
  mb.save(stage_index, {ids});
  mb.hidden = hidden;
}

void EmbeddingStage::backward(MicroBatch& mb, int stage_index) {
  const Tensor ids = mb.take(stage_index)[0];
  const Tensor d_hidden = mb.hidden;
  const int64_t tokens = ids.numel();
  MT_CHECK(
      d_hidden.defined() && d_hidden.ndim() == 3 && d_hidden.dim(0) * d_hidden.dim(1) == tokens,
      "embedding backward: mb.hidden must be the gradient [b, T, d] of the forward output, got ",
      d_hidden.defined() ? d_hidden.describe() : "undefined");
  const int64_t seq = d_hidden.dim(1), dim = d_hidden.dim(2);
  if (wte_->requires_grad())
    ops::embedding_backward(wte_->grad(), d_hidden.reshape({tokens, dim}), ids);
  if (wpe_->requires_grad()) {
    const Tensor d_positions = wpe_->grad().rows(0, seq);
    for (int64_t b = 0; b < d_hidden.dim(0); ++b)
      ops::axpy(d_positions, 1.0f, d_hidden.view(b * seq * dim, {seq, dim}));
  }
  mb.hidden = Tensor();
}

}  // namespace meshtrain

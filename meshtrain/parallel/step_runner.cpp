#include "meshtrain/parallel/step_runner.h"

#include "meshtrain/core/comm/gather_values.h"
#include "meshtrain/core/error.h"
#include "meshtrain/mesh/axis_names.h"

namespace meshtrain {

double StepRunner::run(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  forward_backward(micro_batches, global_tokens);
  return reduce_loss(micro_batches, global_tokens);
}

void StepRunner::forward_backward(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  prepare(micro_batches, global_tokens);
  run_micro_batches(micro_batches);
}

void StepRunner::run_micro_batches(std::vector<MicroBatch>& micro_batches) {
  const int count = static_cast<int>(micro_batches.size());
  for (int k = 0; k < count; ++k) {
    engine_.begin_micro_batch(k, count);
    engine_.forward(micro_batches[k]);
    engine_.backward(micro_batches[k], {}, /*last_backward=*/k == count - 1);
  }
  engine_.finish_backward();
}

double StepRunner::evaluate(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  prepare(micro_batches, global_tokens);
  for (MicroBatch& mb : micro_batches) engine_.forward_only(mb);
  engine_.finish_forward_only();
  return reduce_loss(micro_batches, global_tokens);
}

void StepRunner::prepare(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  MT_CHECK(!micro_batches.empty(), "a step needs at least one micro-batch");
  for (size_t k = 0; k < micro_batches.size(); ++k) {
    micro_batches[k].index = static_cast<int>(k);
    micro_batches[k].loss_scale = static_cast<float>(1.0 / global_tokens);
  }
}

double StepRunner::reduce_loss(const std::vector<MicroBatch>& micro_batches,
                               double global_tokens) {
  double local = 0.0;
  for (const MicroBatch& mb : micro_batches) local += mb.loss_sum;
  // Every tp rank of a group computed the same loss: its rank 0 speaks for the group. Summed on
  // the world communicator, which no strategy counts its traffic on.
  const bool speaks = !mesh_.has_axis(mesh_axis::tp) || mesh_.axis_rank(mesh_axis::tp) == 0;
  return sum_in_rank_order(mesh_.world(), speaks ? local : 0.0) / global_tokens;
}

}  // namespace meshtrain

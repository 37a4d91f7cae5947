#include "parallel/step_runner.h"

#include "core/comm/gather_values.h"
#include "core/error.h"
#include "mesh/axis_names.h"

namespace meshtrain {

double StepRunner::run(std::vector<MicroBatch>& micro_batches, double global_tokens) {
  MT_CHECK(!micro_batches.empty(), "a step needs at least one micro-batch");
  const int count = static_cast<int>(micro_batches.size());
  double loss_sum = 0.0;
  for (int k = 0; k < count; ++k) {
    MicroBatch& mb = micro_batches[k];
    mb.index = k;
    mb.loss_scale = static_cast<float>(1.0 / global_tokens);
    engine_.begin_micro_batch(k, count);
    engine_.forward(mb);
    engine_.backward(mb, {}, /*last_backward=*/k == count - 1);
    loss_sum += mb.loss_sum;
  }
  engine_.finish_backward();
  return reduce_loss(loss_sum, global_tokens);
}

double StepRunner::reduce_loss(double local_loss_sum, double global_tokens) {
  // Every tp rank of a group computed the same loss: its rank 0 speaks for the group. Gathered on
  // the world communicator (which no strategy counts its traffic on) and summed in rank order.
  const bool speaks = !mesh_.has_axis(mesh_axis::tp) || mesh_.axis_rank(mesh_axis::tp) == 0;
  double total = 0.0;
  for (double part :
       all_gather_values(mesh_.world(), std::vector<double>{speaks ? local_loss_sum : 0.0}))
    total += part;
  return total / global_tokens;
}

}  // namespace meshtrain

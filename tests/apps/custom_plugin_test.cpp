// A strategy plugin written in the tests, registered by name beside the built-ins and bound to a
// mesh axis through TrainConfig, trains through run_training: replicated data parallelism on
// dp_replicate composed with the built-in tensor parallelism equals the single-rank run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "meshtrain/plugins/builtin_strategies.h"
#include "meshtrain/train/run_training.h"
#include "tests/support/ddp_plugin.h"
#include "tests/support/error_message.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;

TrainConfig ddp_config() {
  TrainConfig c = uneven_config();
  c.steps = 4;
  c.clip = 0.5f;
  c.world = 4;
  c.mesh = parse_mesh_spec("dp_replicate=2,tp=2");
  c.plugins = plugins_with_ddp();
  c.axis_plugins = {{"dp_replicate", "ddp"}};
  return c;
}

TEST(CustomPlugin, BoundToAnAxisTrainsThroughRunTraining) {
  const TrainConfig c = ddp_config();
  std::ostringstream out;
  const std::vector<StepMetrics> steps = run_training(c, out, false);
  const RunResult& reference = uneven_reference(0.5f);
  ASSERT_EQ(steps.size(), 4u);
  for (size_t s = 0; s < steps.size(); ++s)
    EXPECT_NEAR(steps[s].loss, reference.losses[s], 1e-5 * reference.losses[s]) << s;
}

TEST(CustomPlugin, BindingsNameWhatIsMissing) {
  std::ostringstream out;
  TrainConfig no_axis = ddp_config();
  no_axis.axis_plugins = {{"dp_shard", "ddp"}};
  EXPECT_THAT(error_message<InvalidArgument>([&] { run_training(no_axis, out, false); }),
              HasSubstr("plugin 'ddp' is bound to axis 'dp_shard', which the mesh "
                        "dp_replicate=2,tp=2 does not have"));
  TrainConfig unregistered = ddp_config();
  unregistered.plugins = std::make_shared<const StrategyRegistry>(builtin_strategies());
  EXPECT_THAT(error_message<InvalidArgument>([&] { run_training(unregistered, out, false); }),
              HasSubstr("unknown strategy 'ddp'; known strategies: fsdp, pp, tp"));
}

}  // namespace
}  // namespace meshtrain::testing

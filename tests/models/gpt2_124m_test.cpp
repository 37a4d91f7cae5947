// The 124M shape end to end, kept lean (one sequence of 16 tokens): init, one training step that
// lowers the loss on the same batch, and a bit-exact safetensors round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "meshtrain/models/adamw.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/single_rank.h"
#include "meshtrain/models/token_batches.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

TEST(GPT2_124M, TrainsOneStepAndRoundTripsThroughSafetensors) {
  const GPT2Config config = gpt2_preset("gpt2");
  GPT2 model(config);
  std::vector<int32_t> ids;
  for (int i = 0; i < 17; ++i) ids.push_back((i * 7919 + 13) % 50257);
  const TokenBatch batch{
      Tensor::from_vector(std::vector<int32_t>(ids.begin(), ids.end() - 1), {1, 16}),
      Tensor::from_vector(std::vector<int32_t>(ids.begin() + 1, ids.end()), {1, 16})};

  MicroBatch mb = batch.micro_batch();
  const double before = forward(model, mb);
  EXPECT_NEAR(before, std::log(50257.0), 0.5);  // llm.c starts at ~11.0
  backward(model, mb);
  AdamW adamw({.weight_decay = 0.1f});
  adamw.step(parameter_slots(model), 1e-4f);
  MicroBatch again = batch.micro_batch();
  const double after = forward(model, again);
  EXPECT_TRUE(std::isfinite(after));
  EXPECT_LT(after, before - 0.1);

  testing::ScratchDir dir;
  const std::string path = dir.file("gpt2.safetensors");
  save_parameters(model.parameters(), path);
  GPT2 loaded(config, {.materialize = false});
  for (Parameter* p : loaded.parameters()) p->set_value(Tensor::empty(p->shape()));
  load_parameters(loaded.parameters(), path);
  for (Parameter* p : model.parameters()) {
    const Tensor& a = p->value();
    const Tensor& b = loaded.parameter(p->name()).value();
    ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << p->name();
  }
}

}  // namespace
}  // namespace meshtrain

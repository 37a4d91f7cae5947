// Engine: layers run forward in order and backward in reverse, with each unit's hooks fired
// around its first and last layer (pre hooks in add order, post hooks in reverse).
#include "meshtrain/parallel/engine.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"
#include "tests/parallel/toy_model.h"

namespace meshtrain {
namespace {

using testing::gpt2_like;
using testing::ToyModel;
using testing::Trace;

// Records every hook call as "<tag>.<hook>(<unit name>)".
class TraceHooks : public StepHooks {
 public:
  TraceHooks(std::string tag, Trace* trace, const UnitPlan* plan)
      : tag_(std::move(tag)), trace_(trace), plan_(plan) {}
  void begin_micro_batch(int index, int count) override {
    push("begin_micro_batch(" + std::to_string(index) + "/" + std::to_string(count) + ")");
  }
  void pre_forward(int unit, int) override { push("pre_forward(" + name(unit) + ")"); }
  void post_forward(int unit, int) override { push("post_forward(" + name(unit) + ")"); }
  void pre_backward(int unit, int) override { push("pre_backward(" + name(unit) + ")"); }
  void post_backward(int unit, int, bool) override { push("post_backward(" + name(unit) + ")"); }
  void finish_backward() override { push("finish_backward"); }

 private:
  std::string name(int unit) const { return plan_->units.at(unit).name; }
  void push(const std::string& what) { trace_->push_back(tag_ + "." + what); }
  std::string tag_;
  Trace* trace_;
  const UnitPlan* plan_;
};

TEST(Engine, GPT2ShapedHookOrder) {
  Trace trace;
  ToyModel model = gpt2_like(2, &trace);  // s0 embedding, s1, s2 blocks, s3 head
  Engine engine(model, make_unit_plan(model, model.default_units()));
  TraceHooks hooks("h", &trace, &engine.unit_plan());
  engine.add_hooks(&hooks);

  MicroBatch mb;
  engine.begin_micro_batch(0, 1);
  engine.forward(mb);
  engine.backward(mb);
  engine.finish_backward();
  EXPECT_TRUE(mb.saved.empty());  // every layer's backward took what its forward saved

  const Trace expected{
      "h.begin_micro_batch(0/1)",
      // forward: the root opens before the embedding and closes after the head
      "h.pre_forward(root)", "forward s0@0",
      "h.pre_forward(block0)", "forward s1@1", "h.post_forward(block0)",
      "h.pre_forward(block1)", "forward s2@2", "h.post_forward(block1)",
      "forward s3@3", "h.post_forward(root)",
      // backward: the root opens before the head's backward and closes after the embedding's
      "h.pre_backward(root)", "backward s3@3",
      "h.pre_backward(block1)", "backward s2@2", "h.post_backward(block1)",
      "h.pre_backward(block0)", "backward s1@1", "h.post_backward(block0)",
      "backward s0@0", "h.post_backward(root)",
      "h.finish_backward"};
  EXPECT_EQ(trace, expected);
}

TEST(Engine, TwoHookObjectsNestLikeScopes) {
  Trace trace;
  // Two layers in one unit: hooks fire once per unit, not per layer.
  ToyModel model(2, {{0}, {1}}, {{"u", {0, 1}}}, &trace);
  Engine engine(model, make_unit_plan(model, model.default_units()));
  TraceHooks outer("A", &trace, &engine.unit_plan());
  TraceHooks inner("B", &trace, &engine.unit_plan());
  engine.add_hooks(&outer);
  engine.add_hooks(&inner);
  ASSERT_EQ(engine.hooks().size(), 2u);
  EXPECT_EQ(engine.hooks()[0], &outer);

  MicroBatch mb;
  engine.begin_micro_batch(1, 3);
  engine.forward(mb);
  engine.backward(mb);
  engine.finish_backward();
  const Trace expected{
      "A.begin_micro_batch(1/3)", "B.begin_micro_batch(1/3)",
      "A.pre_forward(u)", "B.pre_forward(u)",
      "forward s0@0", "forward s1@1",
      "B.post_forward(u)", "A.post_forward(u)",
      "A.pre_backward(u)", "B.pre_backward(u)",
      "backward s1@1", "backward s0@0",
      "B.post_backward(u)", "A.post_backward(u)",
      "A.finish_backward", "B.finish_backward"};
  EXPECT_EQ(trace, expected);
}

TEST(Engine, TwoMicroBatchesInFlight) {
  // Forward twice, then backward in reverse (a pipeline-like order): each micro-batch keeps its
  // own saved state, so both backwards find theirs.
  Trace trace;
  ToyModel model(2, {{0}, {1}}, {{"a", {0}}, {"b", {1}}}, &trace);
  Engine engine(model, make_unit_plan(model, model.default_units()));
  MicroBatch m0, m1;
  engine.forward(m0);
  engine.forward(m1);
  engine.backward(m1);
  engine.backward(m0);
  EXPECT_TRUE(m0.saved.empty());
  EXPECT_TRUE(m1.saved.empty());
  EXPECT_EQ(trace.size(), 8u);
}

// What a pipeline runner does: run a span of layers for one micro-batch and say whether it is the
// last backward of the step. The hooks hear the micro-batch index and the flag.
TEST(Engine, SpansTellTheHooksTheMicroBatchAndTheLastBackward) {
  struct Events : StepHooks {
    Trace trace;
    void pre_forward(int unit, int mb) override { add("F", unit, mb); }
    void post_backward(int unit, int mb, bool last) override {
      add(last ? "B(last)" : "B", unit, mb);
    }
    void add(const std::string& what, int unit, int mb) {
      trace.push_back(what + " u" + std::to_string(unit) + " mb" + std::to_string(mb));
    }
  } events;
  ToyModel model = gpt2_like(2);  // units: root {0, 3}, block0 {1}, block1 {2}
  Engine engine(model, make_unit_plan(model, model.default_units()));
  engine.add_hooks(&events);
  MicroBatch mb;
  mb.index = 3;
  engine.forward(mb, {1, 2});
  engine.backward(mb, {2, 2}, false);
  engine.backward(mb, {1, 1}, true);
  EXPECT_EQ(events.trace, (Trace{"F u1 mb3", "F u2 mb3", "B u2 mb3", "B(last) u1 mb3"}));
  EXPECT_THROW(engine.forward(mb, {2, 4}), InvalidArgument);  // past the last layer
}

TEST(Engine, BackwardWithoutForwardIsAnError) {
  ToyModel model(1, {{0}}, {{"a", {0}}});
  Engine engine(model, make_unit_plan(model, model.default_units()));
  MicroBatch mb;
  EXPECT_THROW(engine.backward(mb), InvalidArgument);
}

TEST(Engine, RejectsAPlanForAnotherModel) {
  ToyModel small(1, {{0}}, {{"a", {0}}});
  ToyModel big(2, {{0}, {1}}, {{"a", {0, 1}}});
  EXPECT_THROW(Engine(small, make_unit_plan(big, big.default_units())), InvalidArgument);
}

TEST(Engine, RejectsNullHooks) {
  ToyModel model(1, {{0}}, {{"a", {0}}});
  Engine engine(model, make_unit_plan(model, model.default_units()));
  EXPECT_THROW(engine.add_hooks(nullptr), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

// The tp plugin at its edges: the plan's patterns, clear errors for layouts it cannot run, and the
// export of a tensor-parallel model as the exact Hugging Face tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshtrain/core/comm/local/spawn_ranks.h"
#include "meshtrain/mesh/device_mesh.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/gpt2_init.h"
#include "meshtrain/parallel/parallel_plan.h"
#include "meshtrain/plugins/fsdp/fsdp_strategy.h"
#include "meshtrain/plugins/pp/pp_strategy.h"
#include "meshtrain/plugins/tp/tp_strategy.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/training_runs.h"

namespace meshtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TpPlan, PatternsMatchOneNamePartPerStar) {
  EXPECT_TRUE(nn::matches_pattern("h.*.attn.c_attn", "h.11.attn.c_attn"));
  EXPECT_TRUE(nn::matches_pattern("wte", "wte"));
  EXPECT_FALSE(nn::matches_pattern("h.*.attn", "h.0.attn.c_attn"));
  EXPECT_FALSE(nn::matches_pattern("h.*.attn.c_attn", "h.0.attn"));
  EXPECT_FALSE(nn::matches_pattern("h.*", "h.0.mlp"));
  EXPECT_FALSE(nn::matches_pattern("wte", "wpe"));
  // A part is matched whole: neither a prefix of it nor a '*' inside it stands for more.
  EXPECT_FALSE(nn::matches_pattern("h.1.attn", "h.11.attn"));
  EXPECT_FALSE(nn::matches_pattern("h.11.attn", "h.1.attn"));
  EXPECT_FALSE(nn::matches_pattern("h.1*.attn", "h.11.attn"));
  EXPECT_TRUE(nn::matches_pattern("h.1*.attn", "h.1*.attn"));
  EXPECT_TRUE(nn::matches_pattern("*.*", "h.0"));
  EXPECT_TRUE(nn::matches_pattern("h.*.attn", "h..attn"));  // '*' matches an empty part
}

// Every rule of GPT-2's plan names modules of the model (a pipeline stage may hold none of them,
// so the strategy cannot check this itself), and every module with parameters is covered.
TEST(TpPlan, Gpt2PlanCoversTheModel) {
  GPT2 model(uneven_model());
  const std::vector<nn::NamedModule> modules = model.modules();
  for (const nn::TpRule& rule : model.tensor_parallel_plan()) {
    int matched = 0;
    for (const nn::NamedModule& m : modules) matched += nn::matches_pattern(rule.pattern, m.name);
    EXPECT_EQ(matched, rule.pattern.find('*') != std::string::npos ? 2 : 1) << rule.pattern;
  }
  for (const nn::NamedModule& m : modules) {
    bool covered = false;
    for (const nn::TpRule& rule : model.tensor_parallel_plan())
      covered = covered || nn::matches_pattern(rule.pattern, m.name);
    EXPECT_TRUE(covered) << m.name;
  }
}

// Applies a plan of the given bindings to GPT-2 on `mesh` at every rank; returns rank 0's error.
std::string plan_error(const std::string& mesh_spec,
                       const std::vector<std::pair<std::string, std::vector<std::string>>>& binds,
                       const GPT2Config& model_config = uneven_model()) {
  const MeshLayout layout = parse_mesh_spec(mesh_spec);
  std::vector<std::string> errors(layout.size());
  spawn_ranks(layout.size(), [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, layout);
    GPT2 model(model_config);
    ParallelPlan plan;
    for (const auto& [plugin, axes] : binds) {
      if (plugin == "tp") plan.add(std::make_unique<TpStrategy>(), axes);
      if (plugin == "fsdp") plan.add(std::make_unique<FsdpStrategy>(), axes);
    }
    errors[ctx.rank] = error_message<InvalidArgument>([&] { plan.apply(mesh, model); });
  });
  return errors[0];
}

TEST(TpPlan, ClearErrors) {
  EXPECT_THAT(plan_error("dp_shard=2,tp=2", {{"fsdp", {"dp_shard"}}}),
              StartsWith("mesh axis tp=2 is bound to no strategy; add its plugin to the plan (tp: 'tp', data "
                         "axes: 'fsdp', pp: 'pp')"));
  EXPECT_THAT(plan_error("dp_shard=2", {{"tp", {"tp"}}, {"fsdp", {"dp_shard"}}}),
              StartsWith("strategy 'tp' is bound to axis 'tp' but the mesh is dp_shard=2"));
  EXPECT_THAT(plan_error("dp_shard=2", {{"tp", {"dp_shard"}}}),
              StartsWith("tp binds to the mesh axis 'tp' alone"));
  EXPECT_THAT(plan_error("tp=3", {{"tp", {"tp"}}}),
              StartsWith("tp: module 'h.0.attn' (style heads): tensor parallelism splits "
                         "attention heads over tp: 4 heads do not divide by tp=3"));
  // 6 rows over tp=4 in slices of 2: 2, 2, 2 and none.
  EXPECT_THAT(plan_error("tp=4", {{"tp", {"tp"}}}, GPT2Config{6, 13, 24, 2, 4}),
              HasSubstr("tensor parallelism splits the vocabulary (6 rows) over tp=4 in slices of "
                        "2 rows, which leaves the last tp rank none"));
}

// GPT-2 with one more rule in its tensor-parallel plan.
class Gpt2WithExtraRule : public GPT2 {
 public:
  Gpt2WithExtraRule(const GPT2Config& config, nn::TpRule extra)
      : GPT2(config, GPT2Options{.materialize = false}), extra_(std::move(extra)) {}
  std::vector<nn::TpRule> tensor_parallel_plan() override {
    std::vector<nn::TpRule> plan = GPT2::tensor_parallel_plan();
    plan.push_back(extra_);
    return plan;
  }

 private:
  nn::TpRule extra_;
};

// Every rank's error from applying tp (and pp, when the mesh has it) to that model; "" for none.
std::vector<std::string> extra_rule_errors(const std::string& mesh_spec, const nn::TpRule& rule) {
  const MeshLayout layout = parse_mesh_spec(mesh_spec);
  std::vector<std::string> errors(layout.size());
  spawn_ranks(layout.size(), [&](RankContext& ctx) {
    DeviceMesh mesh(ctx.world, layout);
    const GPT2Config config = gpt2_preset("tiny");
    Gpt2WithExtraRule model(config, rule);
    const Gpt2InitValues init(config, 1);
    ParallelPlan plan;
    plan.add(std::make_unique<TpStrategy>(), {"tp"});
    if (layout.has_axis("pp")) plan.add(std::make_unique<PpStrategy>(), {"pp"});
    try {
      plan.apply(mesh, model, &init);
    } catch (const InvalidArgument& e) {
      errors[ctx.rank] = e.what();
    }
  });
  return errors;
}

TEST(TpPlan, ARuleThatMatchesNoModuleIsAnError) {
  // A misspelt pattern would otherwise leave the MLPs replicated without a word.
  for (const std::string& error : extra_rule_errors("tp=2", {"h.*.mlp.cfc", nn::TpStyle::colwise}))
    EXPECT_THAT(error, StartsWith("tp: the model's tensor-parallel rule 'h.*.mlp.cfc' (style "
                                  "colwise) matches no module; the modules are: wte, wpe, h.0.ln_1"));
  // The plan checks the rules on the whole model, before a pipeline gives each rank its stages:
  // a rule for a module of the last stage only (ln_f) matches on every rank.
  for (const std::string& error :
       extra_rule_errors("pp=2,tp=2", {"ln_f", nn::TpStyle::sequence}))
    EXPECT_EQ(error, "");
  for (const std::string& error : extra_rule_errors("pp=2,tp=2", {"h.*.mlp", nn::TpStyle::colwise}))
    EXPECT_THAT(error, HasSubstr("rule 'h.*.mlp' (style colwise) matches no module"));
}

// Rank 0's error from building a Trainer on every rank and running one step.
std::string trainer_error(const TrainConfig& c) {
  std::vector<std::string> errors(c.world);
  spawn_ranks(c.world, [&](RankContext& ctx) {
    errors[ctx.rank] = error_message<InvalidArgument>([&] {
      Trainer trainer(c, ctx.world, ctx.memory);
      trainer.step();
    });
  });
  return errors[0];
}

TEST(TpPlan, SequenceParallelNeedsRowsThatDivideByTp) {
  TrainConfig c = uneven_config();
  c.world = 2;
  c.mesh = parse_mesh_spec("tp=2");
  c.set("tp", "sequence_parallel", "true");
  c.batch = 3;
  c.seq = 11;  // 3 x 11 = 33 token rows over tp=2
  // Refused when the config is checked, before a rank is built.
  EXPECT_THAT(error_message<InvalidArgument>([&] { c.validate(); }),
              HasSubstr("sequence parallelism (--sequence-parallel) splits each micro-batch's 33 token rows (--batch / "
                        "data-parallel degree / --grad-accum x --seq) over tp=2"));
}

TEST(TpPlan, OptionsForAPluginTheMeshDoesNotUseAreAnError) {
  TrainConfig c = uneven_config();
  c.world = 2;
  c.mesh = parse_mesh_spec("tp=2");
  c.set("fsdp", "mode", "hybrid");
  EXPECT_THAT(trainer_error(c), StartsWith("options are given for the 'fsdp' plugin, but the mesh "
                                           "tp=2 has no axis it serves"));
}

// Export under dp_shard=2 x tp=2 writes Hugging Face GPT-2 tensors: before training they equal
// the single-rank initialisation bit for bit (so every piece, q | k | v included, went back to
// its place), and after training the file loads into the single-rank model and equals the
// gathered parameters bit for bit.
TEST(TpPlan, ExportWritesTheHuggingFaceTensors) {
  ScratchDir dir;
  TrainConfig c = uneven_config();
  c.world = 4;
  c.steps = 2;
  c.mesh = parse_mesh_spec("dp_shard=2,tp=2");
  c.set("tp", "sequence_parallel", "true");
  const std::string before = dir.file("before.safetensors"), after = dir.file("after.safetensors");
  std::map<std::string, std::vector<float>> gathered;
  with_trainers(c, [&](Trainer& trainer, MemoryTracker&) {
    trainer.save(before);
    trainer.step();
    trainer.step();
    trainer.save(after);
    std::map<std::string, std::vector<float>> mine;
    trainer.gather_parameters(
        [&](const Parameter& p, const Tensor& v) { mine[p.name()] = v.to_vector(); });
    if (trainer.rank() == 0) gathered = std::move(mine);
  });

  GPT2 initial(gpt2_config(*c.model), {.seed = c.seed});
  GPT2 loaded(gpt2_config(*c.model), {.seed = c.seed + 1});
  load_parameters(loaded.parameters(), before);
  for (Parameter* p : initial.parameters())
    EXPECT_EQ(loaded.parameter(p->name()).value().to_vector(), p->value().to_vector()) << p->name();
  load_parameters(loaded.parameters(), after);
  ASSERT_EQ(gathered.size(), loaded.parameters().size());
  for (Parameter* p : loaded.parameters()) {
    EXPECT_EQ(p->value().to_vector(), gathered.at(p->name())) << p->name();
    EXPECT_NE(p->value().to_vector(), initial.parameter(p->name()).value().to_vector())
        << p->name() << " did not train";
  }
}

}  // namespace
}  // namespace meshtrain::testing

// The model registry: families by name, presets, options checked against the declarations with
// errors that name the option and its flag, the GPT-2 family's spec, and reading a model back from
// a safetensors file and the config.json beside it.
#include "meshtrain/models/model_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.h"
#include "meshtrain/models/builtin_models.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "meshtrain/models/gpt2_family.h"
#include "meshtrain/models/safetensors.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::error_message;

template <typename F>
std::string refusal(F&& f) {
  return error_message<InvalidArgument>(std::forward<F>(f));
}

TEST(ModelRegistry, PresetsAndOptionsMakeTheSameModel) {
  const ModelRegistry models = builtin_models();
  EXPECT_EQ(models.names(), (std::vector<std::string>{"gpt2", "llama"}));
  const ModelSpecPtr tiny = models.preset("tiny");
  EXPECT_EQ(tiny->family(), "gpt2");
  EXPECT_EQ(tiny->describe(), "GPT-2 V=64 T=16 d=32 L=2 H=4");
  EXPECT_EQ(models.create("gpt2", tiny->options())->describe(), tiny->describe());
  EXPECT_EQ(models.preset("tiny", {{"layers", "3"}})->describe(), "GPT-2 V=64 T=16 d=32 L=3 H=4");
  EXPECT_EQ(models.family_of_preset("gpt2-xl").name, "gpt2");
  EXPECT_EQ(gpt2_config(*models.preset("gpt2")), gpt2_preset("gpt2"));
}

TEST(ModelRegistry, RefusalsNameTheOptionAndItsFlag) {
  const ModelRegistry models = builtin_models();
  EXPECT_THAT(refusal([&] { models.preset("gpt5"); }),
              HasSubstr("unknown model preset 'gpt5'; known: demo, gpt2, gpt2-large"));
  EXPECT_THAT(refusal([&] { models.create("mamba", {}); }),
              HasSubstr("unknown model family 'mamba'; known: gpt2, llama"));
  EXPECT_THAT(refusal([&] { models.create("gpt2", {{"vocab", "64"}}); }),
              HasSubstr("the gpt2 model needs ctx (--ctx): context length"));
  EXPECT_THAT(refusal([&] { models.preset("tiny", {{"dim", "x"}}); }),
              HasSubstr("gpt2 option dim (--dim) expects an integer of at least 1, got 'x'"));
  EXPECT_THAT(refusal([&] { models.preset("tiny", {{"kv_heads", "2"}}); }),
              HasSubstr("unknown gpt2 option 'kv_heads'; known: vocab, ctx, dim, layers, heads"));
  EXPECT_THAT(refusal([&] { models.preset("tiny", {{"heads", "5"}}); }),
              HasSubstr("heads must divide dim, got dim = 32 and heads = 5"));
}

ModelFamily family(std::string name, std::map<std::string, TextOptions> presets = {}) {
  return ModelFamily{
      .name = std::move(name),
      .help = "",
      .options = {{.name = "width", .type = OptionSpec::Type::integer, .help = "", .minimum = 1}},
      .presets = std::move(presets),
      .factory = [](const OptionValues&) -> ModelSpecPtr { return nullptr; }};
}

TEST(ModelRegistry, RefusesMalformedFamilies) {
  ModelRegistry models = builtin_models();
  EXPECT_THAT(refusal([&] { models.add(family("gpt2")); }),
              HasSubstr("model family 'gpt2' is already registered"));
  EXPECT_THAT(refusal([&] { models.add(family("other", {{"tiny", {{"width", "2"}}}})); }),
              HasSubstr("model family 'other': preset 'tiny' is already one of 'gpt2'"));
  EXPECT_THAT(refusal([&] { models.add(family("other", {{"narrow", {{"width", "0"}}}})); }),
              HasSubstr("other option width (--other-width) expects an integer of at least 1"));
  ModelFamily no_factory = family("other");
  no_factory.factory = nullptr;
  EXPECT_THAT(refusal([&] { models.add(no_factory); }),
              HasSubstr("model family 'other' registered without a factory"));
  models.add(family("other"));  // its factory makes no model: a bug in the family, named
  EXPECT_THAT(error_message<Error>([&] { models.create("other", {{"width", "2"}}); }),
              HasSubstr("model family 'other' made no model"));
}

TEST(Gpt2Family, SpecBuildsTheModelWithoutTensors) {
  const GPT2Config config = gpt2_preset("tiny");
  const ModelSpecPtr spec = gpt2_model(config);
  const std::unique_ptr<Model> model = spec->build(Device::cpu());
  const GPT2 reference(config);
  ASSERT_EQ(model->parameters().size(), const_cast<GPT2&>(reference).parameters().size());
  for (Parameter* p : model->parameters()) {
    EXPECT_THROW(p->value(), Error) << p->name();  // no tensor: a plan fills each rank's pieces
    EXPECT_EQ(p->global_shape(),
              const_cast<GPT2&>(reference).parameter(p->name()).global_shape());
  }
  EXPECT_EQ(spec->num_parameters(), config.num_parameters());
  EXPECT_EQ(spec->vocab(), 64);
  EXPECT_EQ(spec->max_seq(), 16);
  EXPECT_DOUBLE_EQ(spec->training_flops(100.0, 16),
                   6.0 * static_cast<double>(config.num_parameters()) * 100 + 12.0 * 2 * 16 * 32 * 100);
  EXPECT_EQ(spec->safetensors_metadata(), (std::map<std::string, std::string>{{"heads", "4"}}));
}

TEST(Gpt2Family, ReadsTheModelOfASafetensorsFile) {
  testing::ScratchDir dir;
  const ModelRegistry models = builtin_models();
  GPT2 model(gpt2_preset("tiny"));
  const std::string hf = dir.file("hf.safetensors");  // no head count, as Hugging Face writes
  save_parameters(model.parameters(), hf);
  EXPECT_THAT(refusal([&] { models.from_safetensors(hf); }),
              HasSubstr("the gpt2 model needs heads (--heads)"));
  EXPECT_EQ(models.from_safetensors(hf, {{"heads", "4"}})->describe(),
            "GPT-2 V=64 T=16 d=32 L=2 H=4");
  EXPECT_THAT(refusal([&] { models.from_safetensors(hf, {{"heads", "4"}, {"dim", "64"}}); }),
              HasSubstr("--dim 64 disagrees with '" + hf + "', which holds dim 32"));

  const std::string other = dir.file("other.safetensors");
  SafetensorsWriter writer(other, {{"w", DType::f32, {2}}});
  writer.write("w", Tensor::zeros({2}));
  writer.finish();
  EXPECT_THAT(refusal([&] { models.from_safetensors(other); }),
              HasSubstr("holds no model of a family that reads safetensors files (gpt2, llama)"));
}

// A count in transformers' config.json that no model takes is refused naming the file and the key,
// not divided by (SIGFPE: an input fuzz_hf_config found) or wrapped to another number.
TEST(HfConfigJson, RefusesCountsOutOfRangeNamingTheFileAndKey) {
  testing::ScratchDir dir;
  const ModelRegistry models = builtin_models();
  std::filesystem::create_directories(dir.file("llama"));
  const std::string llama = dir.file("llama/model.safetensors");
  SafetensorsWriter writer(llama, {{"model.embed_tokens.weight", DType::f32, {64, 32}}});
  writer.write("model.embed_tokens.weight", Tensor::zeros({64, 32}));
  writer.finish();
  std::ofstream(dir.file("llama/config.json"))
      << R"({"model_type": "llama", "hidden_size": 32, "num_attention_heads": -0, "head_dim": 8})";
  EXPECT_THAT(refusal([&] { models.from_safetensors(llama); }),
              HasSubstr("'" + dir.file("llama/config.json") +
                        "': num_attention_heads must be at least 1, got 0"));

  std::filesystem::create_directories(dir.file("gpt2"));
  const std::string gpt2 = dir.file("gpt2/model.safetensors");
  GPT2 model(gpt2_preset("tiny"));
  save_parameters(model.parameters(), gpt2);
  std::ofstream(dir.file("gpt2/config.json"))
      << R"({"model_type": "gpt2", "n_head": 18446744073709551615})";
  EXPECT_THAT(refusal([&] { models.from_safetensors(gpt2); }),
              HasSubstr("'" + dir.file("gpt2/config.json") +
                        "': n_head must be an integer of at most 9223372036854775807, got "
                        "18446744073709551615"));
}

}  // namespace
}  // namespace meshtrain

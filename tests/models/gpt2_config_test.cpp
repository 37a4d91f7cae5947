#include "meshtrain/models/gpt2_config.h"

#include <gtest/gtest.h>

#include "meshtrain/core/error.h"

namespace meshtrain {
namespace {

TEST(GPT2Config, PresetsMatchHuggingFace) {
  EXPECT_EQ(gpt2_preset("gpt2"), (GPT2Config{50257, 1024, 768, 12, 12}));
  EXPECT_EQ(gpt2_preset("gpt2-medium"), (GPT2Config{50257, 1024, 1024, 24, 16}));
  EXPECT_EQ(gpt2_preset("gpt2-large"), (GPT2Config{50257, 1024, 1280, 36, 20}));
  EXPECT_EQ(gpt2_preset("gpt2-xl"), (GPT2Config{50257, 1024, 1600, 48, 25}));
  EXPECT_EQ(gpt2_preset("tiny"), (GPT2Config{64, 16, 32, 2, 4}));
  EXPECT_EQ(gpt2_preset("demo").vocab, 256);
  for (const std::string& name : gpt2_preset_names()) EXPECT_NO_THROW(gpt2_preset(name).validate());
}

TEST(GPT2Config, ParameterCountsMatchHuggingFace) {
  // transformers' GPT2Model(...).num_parameters(); the LM head is tied.
  EXPECT_EQ(gpt2_preset("gpt2").num_parameters(), 124439808);
  EXPECT_EQ(gpt2_preset("gpt2-medium").num_parameters(), 354823168);
  EXPECT_EQ(gpt2_preset("gpt2-large").num_parameters(), 774030080);
  EXPECT_EQ(gpt2_preset("gpt2-xl").num_parameters(), 1557611200);
}

TEST(GPT2Config, UnknownPresetListsTheKnownNames) {
  try {
    gpt2_preset("gpt3");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'gpt3'"), std::string::npos) << what;
    EXPECT_NE(what.find("gpt2-medium"), std::string::npos) << what;
    EXPECT_NE(what.find("tiny"), std::string::npos) << what;
  }
}

TEST(GPT2Config, ValidationSaysWhatIsWrong) {
  try {
    GPT2Config{64, 16, 30, 2, 4}.validate();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("heads must divide dim"), std::string::npos) << e.what();
  }
  EXPECT_THROW((GPT2Config{0, 16, 32, 2, 4}.validate()), InvalidArgument);
  EXPECT_THROW((GPT2Config{64, 0, 32, 2, 4}.validate()), InvalidArgument);
  EXPECT_THROW((GPT2Config{64, 16, 32, 0, 4}.validate()), InvalidArgument);
  EXPECT_THROW((GPT2Config{64, 16, 32, 2, 0}.validate()), InvalidArgument);
  EXPECT_THROW((GPT2Config{70000, 16, 32, 2, 4}.validate()), InvalidArgument);
}

}  // namespace
}  // namespace meshtrain

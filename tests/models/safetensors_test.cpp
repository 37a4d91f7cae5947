#include "meshtrain/models/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/bf16.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using testing::expect_error;

// A hand-made file: the 8-byte length, the JSON header, then `data`.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

TEST(Safetensors, WriterAndReaderRoundTripWithConversions) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.safetensors");
  const Tensor a =
      Tensor::from_vector(std::vector<float>{1.0f, -2.5f, 3.0f, 1.0f / 3.0f, 5.0f, 6.0f}, {2, 3});
  const Tensor b = Tensor::from_vector(std::vector<float>{0.1f, 0.2f, 0.3f}, {3});
  const Tensor empty = Tensor::empty({0, 4});
  {
    SafetensorsWriter writer(
        path, {{"a", DType::f32, {2, 3}}, {"b", DType::bf16, {3}}, {"e", DType::f32, {0, 4}}},
        {{"format", "pt"}});
    writer.write("b", b);                            // any order
    writer.write("a", a.flatten().view(3, {3}), 3);  // pieces at an element offset
    writer.write("a", a.flatten().view(0, {3}), 0);
    writer.write("e", empty);
    writer.finish();
  }
  EXPECT_EQ((std::filesystem::file_size(path) - 8 - 6 * 4 - 3 * 2) % 8, 0u);
  SafetensorsReader reader(path);
  ASSERT_EQ(reader.entries().size(), 3u);
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  EXPECT_EQ(reader.find("b")->dtype, "BF16");
  EXPECT_EQ(reader.find("a")->shape, (Shape{2, 3}));
  Tensor a_back = Tensor::empty({2, 3});
  reader.read("a", a_back);
  EXPECT_EQ(a_back.to_vector(), a.to_vector());
  Tensor b_back = Tensor::empty({3});
  reader.read("b", b_back);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b_back.to_vector()[i], to_f32(to_bf16(b.to_vector()[i])));
  Tensor a_bf16 = Tensor::empty({2}, DType::bf16);
  reader.read("a", a_bf16, 2);  // a dim-0 shard's slice, converted to bf16
  EXPECT_EQ(a_bf16.to_vector(), (std::vector<float>{3.0f, to_f32(to_bf16(1.0f / 3.0f))}));
  EXPECT_THROW(reader.read("a", Tensor::empty({2}), 5), InvalidArgument);
  EXPECT_THROW(reader.read("zz", Tensor::empty({2})), InvalidArgument);
}

TEST(Safetensors, WriterChecksEverythingWasWritten) {
  testing::ScratchDir dir;
  SafetensorsWriter writer(dir.file("w.safetensors"), {{"x", DType::f32, {4}}});
  writer.write("x", Tensor::zeros({3}));
  EXPECT_THROW(writer.write("y", Tensor::zeros({1})), InvalidArgument);
  EXPECT_THROW(writer.write("x", Tensor::zeros({2}), 3), InvalidArgument);
  expect_error<IoError>([&] { writer.finish(); }, "'x'", "3 of its 4");
}

class GPT2Checkpoint : public ::testing::Test {
 protected:
  GPT2 model{gpt2_preset("tiny"), {.seed = 11}};
  testing::ScratchDir dir;
  std::string path = dir.file("tiny.safetensors");

  // The tiny model's tensors under other keys, plus extra raw entries.
  void save_with(const std::string& prefix, std::vector<SafetensorsSpec> extra = {},
                 const std::string& skip = "") {
    std::vector<SafetensorsSpec> specs;
    for (Parameter* p : model.parameters())
      if (p->name() != skip) specs.push_back({prefix + p->name(), DType::f32, p->shape()});
    for (const auto& e : extra) specs.push_back(e);
    SafetensorsWriter writer(path, specs);
    for (Parameter* p : model.parameters())
      if (p->name() != skip) writer.write(prefix + p->name(), p->value());
    for (const auto& e : extra) writer.write(e.name, Tensor::zeros(e.shape));
    writer.finish();
  }
  void expect_loaded(GPT2& other) {
    for (Parameter* p : model.parameters())
      EXPECT_EQ(other.parameter(p->name()).value().to_vector(), p->value().to_vector())
          << p->name();
  }
};

TEST_F(GPT2Checkpoint, LoadsPrefixedKeysAndIgnoresMaskBuffers) {
  save_with("transformer.", {{"transformer.h.0.attn.bias", DType::f32, {1, 1, 16, 16}},
                             {"h.1.attn.masked_bias", DType::f32, {}}});
  GPT2 other(gpt2_preset("tiny"), {.seed = 12});
  load_parameters(other.parameters(), path);
  expect_loaded(other);
}

TEST_F(GPT2Checkpoint, LoadsBF16IntoF32) {
  save_parameters(model.parameters(), path, DType::bf16);
  GPT2 other(gpt2_preset("tiny"), {.seed = 12});
  load_parameters(other.parameters(), path);
  const std::vector<float> want = model.parameter("h.0.mlp.c_fc.weight").value().to_vector();
  const std::vector<float> got = other.parameter("h.0.mlp.c_fc.weight").value().to_vector();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], to_f32(to_bf16(want[i])));
}

TEST_F(GPT2Checkpoint, MissingKeyIsNamed) {
  save_with("", {}, "h.1.ln_2.bias");
  expect_error<InvalidArgument>([&] { load_parameters(model.parameters(), path); },
                                "no key for parameter 'h.1.ln_2.bias'");
}

TEST_F(GPT2Checkpoint, UnknownKeyIsNamed) {
  save_with("", {{"lm_head.weight", DType::f32, {64, 32}}});
  expect_error<InvalidArgument>([&] { load_parameters(model.parameters(), path); },
                                "'lm_head.weight'", "names no parameter");
}

TEST_F(GPT2Checkpoint, DuplicateKeyIsNamed) {
  save_with("", {{"transformer.wpe.weight", DType::f32, {16, 32}}});
  expect_error<InvalidArgument>([&] { load_parameters(model.parameters(), path); },
                                "'wpe.weight' is given twice");
}

TEST_F(GPT2Checkpoint, WrongShapeIsNamed) {
  GPT2 longer(GPT2Config{64, 32, 32, 2, 4});
  save_parameters(longer.parameters(), path);
  expect_error<InvalidArgument>([&] { load_parameters(model.parameters(), path); }, "'wpe.weight'",
                                "[32, 32]", "[16, 32]");
}

TEST_F(GPT2Checkpoint, WrongDtypeIsNamed) {
  write_raw(path, R"({"ln_f.bias":{"dtype":"F16","shape":[32],"data_offsets":[0,64]}})",
            std::string(64, '\0'));
  expect_error<InvalidArgument>([&] { load_parameters({&model.parameter("ln_f.bias")}, path); },
                                "'ln_f.bias'", "F16", "F32 or BF16");
}

TEST_F(GPT2Checkpoint, TruncatedFileNamesTheKeyAndOffset) {
  save_parameters(model.parameters(), path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  expect_error<IoError>([&] { load_parameters(model.parameters(), path); }, "'ln_f.bias'",
                        "truncated");
}

TEST(SafetensorsErrors, CorruptHeadersAreIoErrors) {
  testing::ScratchDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "JSON invalid at byte");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
            std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "'x'", "data_offsets [0, 8)");
  write_raw(path, R"({"x":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "'x'", "unknown dtype 'Q4'");
  write_raw(
      path,
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "overlap");
  // The data section is indexed whole: no bytes after the tensors, no hole between them.
  write_raw(path, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
            std::string(12, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "end at data offset 8",
                        "holds 12 bytes of data");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); },
                        "data bytes [0, 4) belong to no tensor");
  write_raw(path, R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
            "");
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "'x'", "more than 2^48 elements");
  // Found by fuzz_safetensors: a number past double's range escaped as the JSON library's own
  // exception (std::terminate); nesting past any header's is refused while parsing.
  write_raw(path, R"({"x":{"dtype":"F32","shape":[2,281474976710656e308],"data_offsets":[0,8]}})",
            std::string(8, '\0'));
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "header JSON invalid", "overflow");
  write_raw(path, R"({"__metadata__":)" + std::string(100, '[') + std::string(100, ']') + "}",
            "");
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "nested deeper than 16 levels");
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "header length 1000");
  std::filesystem::resize_file(path, 3);
  expect_error<IoError>([&] { SafetensorsReader r(path); }, "too short");
  expect_error<IoError>([&] { SafetensorsReader r(dir.file("absent")); }, "cannot open");
}

}  // namespace
}  // namespace meshtrain

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/models/token_file.h"
#include "tests/support/error_message.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

using testing::expect_error;

std::vector<Token> iota_tokens(size_t n, Token modulo) {
  std::vector<Token> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<Token>(i % modulo);
  return tokens;
}

// The little-endian bytes of `value`, as numpy's tobytes() writes an int32 or uint32.
std::string le32(uint32_t value) {
  std::string bytes;
  for (int b = 0; b < 4; ++b) bytes += static_cast<char>((value >> (8 * b)) & 0xff);
  return bytes;
}

// A token file as llm.c's dev/data/data_common.py writes one: a header of 256 int32 (magic,
// version, count, zeros), then `payload`.
void write_by_hand(const std::string& path, int32_t magic, int32_t version, uint32_t count,
                   const std::string& payload) {
  std::string bytes = le32(magic) + le32(version) + le32(count) + std::string(253 * 4, '\0');
  std::ofstream(path, std::ios::binary) << bytes << payload;
}

std::vector<int32_t> header_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<int32_t> header(3);
  in.read(reinterpret_cast<char*>(header.data()), 3 * sizeof(int32_t));
  return header;
}

TEST(TokenFile, RoundTripsInLlmcFormat) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  const std::vector<Token> tokens = {0, 1, 65535, 50256, 7};
  write_token_file(path, tokens);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2 * tokens.size());
  EXPECT_EQ(header_of(path), (std::vector<int32_t>{20240520, 1, 5}));
  const TokenFile file = read_token_file(path);
  EXPECT_EQ(file.tokens, tokens);
  EXPECT_EQ(file.format, TokenFormat::gpt2);
  write_token_file(path, {});
  EXPECT_TRUE(read_token_file(path).tokens.empty());
}

TEST(TokenFile, Llama3RoundTripsTokensAbove65535) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  const std::vector<Token> tokens = {0, 65535, 65536, 128000, 128255, 7};
  write_token_file(path, tokens, TokenFormat::llama3);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 4 * tokens.size());
  EXPECT_EQ(header_of(path), (std::vector<int32_t>{20240801, 7, 6}));
  const TokenFile file = read_token_file(path);
  EXPECT_EQ(file.tokens, tokens);
  EXPECT_EQ(file.format, TokenFormat::llama3);
  write_token_file(path, {}, TokenFormat::llama3);
  EXPECT_TRUE(read_token_file(path).tokens.empty());
  EXPECT_EQ(read_token_file(path).format, TokenFormat::llama3);
}

TEST(TokenFile, ReadsALlama3FileWrittenByHand) {
  testing::ScratchDir dir;
  const std::string path = dir.file("llmc.bin");
  // <|begin_of_text|> "Hello" <|end_of_text|> in Llama 3's vocabulary.
  write_by_hand(path, 20240801, 7, 3, le32(128000) + le32(9906) + le32(128001));
  const TokenFile file = read_token_file(path);
  EXPECT_EQ(file.tokens, (std::vector<Token>{128000, 9906, 128001}));
  EXPECT_EQ(file.format, TokenFormat::llama3);
}

TEST(TokenFile, Gpt2RefusesATokenAbove65535) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  const auto write = [&] { write_token_file(path, {1, 65535, 65536}, TokenFormat::gpt2); };
  expect_error<InvalidArgument>(write, path, "token 65536 at position 2", "uint16", "llama-3");
  EXPECT_FALSE(std::filesystem::exists(path));  // refused before the file is made
}

TEST(TokenFile, AVersionOtherThanItsMagicsIsRefused) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  write_by_hand(path, 20240801, 1, 1, le32(5));  // llama-3's magic with gpt-2's version
  expect_error<IoError>([&] { read_token_file(path); }, path, "version 1, expected 7", "llama-3",
                        "20240801");
  write_by_hand(path, 20240520, 7, 1, le32(5));
  expect_error<IoError>([&] { read_token_file(path); }, "version 7, expected 1", "gpt-2");
}

TEST(TokenFile, TheSizeCheckUsesTheFormatsWidth) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  // Four uint16 tokens are the bytes of two uint32 ones: a llama-3 header counting 4 is refused.
  write_by_hand(path, 20240801, 7, 4, le32(1) + le32(2));
  expect_error<IoError>([&] { read_token_file(path); }, "header says 4 llama-3 tokens of 4 bytes",
                        "so 1040 bytes, but the file has 1032");
}

TEST(TokenFile, FormatNamesAreLlmcs) {
  EXPECT_EQ(token_format_name(TokenFormat::gpt2), "gpt-2");
  EXPECT_EQ(token_format_name(TokenFormat::llama3), "llama-3");
  EXPECT_EQ(parse_token_format("gpt-2"), TokenFormat::gpt2);
  EXPECT_EQ(parse_token_format("llama-3"), TokenFormat::llama3);
  expect_error<InvalidArgument>([] { parse_token_format("llama3"); }, "'llama3'", "gpt-2",
                                "llama-3");
}

TEST(TokenFile, BadFilesAreIoErrors) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  write_token_file(path, {1, 2, 3});
  std::filesystem::resize_file(path, 1024 + 4);
  EXPECT_THROW(read_token_file(path), IoError);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    const int32_t wrong = 123;
    f.write(reinterpret_cast<const char*>(&wrong), 4);
  }
  expect_error<IoError>([&] { read_token_file(path); }, path, "magic 123", "20240520", "20240801");
  EXPECT_THROW(read_token_file(dir.file("absent.bin")), IoError);
}

TEST(TokenFile, PrepareMakesOneTokenPerByte) {
  testing::ScratchDir dir;
  {
    std::ofstream out(dir.file("in.txt"), std::ios::binary);
    out << "Hi\n\xff";
  }
  const std::vector<Token> expected = {'H', 'i', '\n', 255};
  EXPECT_EQ(prepare_byte_tokens(dir.file("in.txt"), dir.file("out.bin")), 4);
  EXPECT_EQ(read_token_file(dir.file("out.bin")).tokens, expected);
  EXPECT_EQ(std::filesystem::file_size(dir.file("out.bin")), 1024u + 2 * 4);
  EXPECT_EQ(prepare_byte_tokens(dir.file("in.txt"), dir.file("out.bin"), TokenFormat::llama3), 4);
  EXPECT_EQ(header_of(dir.file("out.bin")), (std::vector<int32_t>{20240801, 7, 4}));
  EXPECT_EQ(read_token_file(dir.file("out.bin")).tokens, expected);
  EXPECT_EQ(std::filesystem::file_size(dir.file("out.bin")), 1024u + 4 * 4);
}

TEST(TokenBatches, OffsetsFollowTheClosedForm) {
  // Token i holds i % 1000 and the file has 1000 tokens, so a read at position q yields q % 1000.
  const int64_t n = 1000, B = 4, T = 8;
  TokenBatches batches(iota_tokens(n, 1000), 1000, B, T);
  for (int64_t step : {0, 1, 5, 31, 32, 1000}) {
    const TokenBatch batch = batches.batch(step);
    ASSERT_EQ(batch.tokens.shape(), (Shape{B, T}));
    const std::vector<float> tokens = batch.tokens.to_vector(), targets = batch.targets.to_vector();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t position = ((step * B) + b) * T + t;
        ASSERT_EQ(tokens[b * T + t], position % n) << step << " " << b << " " << t;
        ASSERT_EQ(targets[b * T + t], (position + 1) % n) << step << " " << b << " " << t;
      }
  }
}

TEST(TokenBatches, DataRanksSplitTheGlobalBatch) {
  const int64_t B = 6, T = 5;
  const std::vector<Token> tokens = iota_tokens(97, 97);  // prime: wraps at odd places
  const TokenBatch whole = TokenBatches(tokens, 97, B, T).batch(3);
  for (int64_t D : {1, 2, 3, 6}) {
    for (int64_t r = 0; r < D; ++r) {
      TokenBatches part(tokens, 97, B, T, D, r);
      EXPECT_EQ(part.local_batch(), B / D);
      const TokenBatch mine = part.batch(3);
      EXPECT_EQ(mine.tokens.to_vector(), whole.tokens.rows(r * B / D, B / D).to_vector());
      EXPECT_EQ(mine.targets.to_vector(), whole.targets.rows(r * B / D, B / D).to_vector());
    }
  }
}

TEST(TokenBatches, BadLayoutsAreClearErrors) {
  const std::vector<Token> tokens = iota_tokens(100, 50);
  try {
    TokenBatches(tokens, 50, 6, 4, 4, 0);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(
        std::string(e.what()).find("B = 6 must divide evenly over the data-parallel degree D = 4"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(TokenBatches(tokens, 50, 4, 4, 2, 2), InvalidArgument);
  EXPECT_THROW(TokenBatches(tokens, 50, 1, 100), InvalidArgument);  // needs T + 1 tokens
  EXPECT_THROW(TokenBatches(tokens, 49, 1, 4), InvalidArgument);    // token 49 >= vocab
}

// Llama 3's vocabulary (128,256) is past uint16: its tokens reach the batches whole, and the
// vocabulary check still names the token.
TEST(TokenBatches, TakeTokensOfLlama3sVocabulary) {
  const std::vector<Token> tokens = {128000, 65536, 128255, 9906, 128001};
  const TokenBatch batch = TokenBatches(tokens, 128256, 1, 4).batch(0);
  EXPECT_EQ(batch.tokens.to_vector(), (std::vector<float>{128000, 65536, 128255, 9906}));
  EXPECT_EQ(batch.targets.to_vector(), (std::vector<float>{65536, 128255, 9906, 128001}));
  expect_error<InvalidArgument>([&] { TokenBatches(tokens, 128000, 1, 4); }, "token 128255",
                                "vocabulary is 128000");
}

TEST(DemoCorpus, IsShippedAsByteTokensOfAscii) {
  testing::ScratchDir dir;
  const int64_t count =
      prepare_byte_tokens(MESHTRAIN_SOURCE_DIR "/data/demo_corpus.txt", dir.file("demo.bin"));
  EXPECT_GT(count, 100000);
  EXPECT_LT(count, 300000);
  const std::vector<Token> tokens = read_token_file(dir.file("demo.bin")).tokens;
  for (Token t : tokens) ASSERT_LT(t, 128u);
}

}  // namespace
}  // namespace meshtrain

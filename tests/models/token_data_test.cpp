#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshtrain/core/error.h"
#include "meshtrain/models/token_batches.h"
#include "meshtrain/models/token_file.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain {
namespace {

std::vector<uint16_t> iota_tokens(size_t n, uint16_t modulo) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(i % modulo);
  return tokens;
}

TEST(TokenFile, RoundTripsInLlmcFormat) {
  testing::ScratchDir dir;
  const std::string path = dir.file("t.bin");
  const std::vector<uint16_t> tokens = {0, 1, 65535, 50256, 7};
  write_token_file(path, tokens);
  EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2 * tokens.size());
  std::ifstream in(path, std::ios::binary);
  int32_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5);
  EXPECT_EQ(read_token_file(path), tokens);
  write_token_file(path, {});
  EXPECT_TRUE(read_token_file(path).empty());
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
  try {
    read_token_file(path);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("magic 123"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_token_file(dir.file("absent.bin")), IoError);
}

TEST(TokenFile, PrepareMakesOneTokenPerByte) {
  testing::ScratchDir dir;
  {
    std::ofstream out(dir.file("in.txt"), std::ios::binary);
    out << "Hi\n\xff";
  }
  EXPECT_EQ(prepare_byte_tokens(dir.file("in.txt"), dir.file("out.bin")), 4);
  EXPECT_EQ(read_token_file(dir.file("out.bin")), (std::vector<uint16_t>{'H', 'i', '\n', 255}));
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
  const std::vector<uint16_t> tokens = iota_tokens(97, 97);  // prime: wraps at odd places
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
  const std::vector<uint16_t> tokens = iota_tokens(100, 50);
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

TEST(DemoCorpus, IsShippedAsByteTokensOfAscii) {
  testing::ScratchDir dir;
  const int64_t count =
      prepare_byte_tokens(MESHTRAIN_SOURCE_DIR "/data/demo_corpus.txt", dir.file("demo.bin"));
  EXPECT_GT(count, 100000);
  EXPECT_LT(count, 300000);
  const std::vector<uint16_t> tokens = read_token_file(dir.file("demo.bin"));
  for (uint16_t t : tokens) ASSERT_LT(t, 128);
}

}  // namespace
}  // namespace meshtrain

#include "models/token_file.h"

#include <array>
#include <bit>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace meshtrain {

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {
constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
}  // namespace

std::vector<uint16_t> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(detail::concat("cannot open token file '", path, "'"));
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::array<int32_t, kHeaderInts> header{};
  if (size < kHeaderBytes || !in.read(reinterpret_cast<char*>(header.data()), kHeaderBytes))
    throw IoError(detail::concat("token file '", path, "' has ", size,
                                 " bytes, fewer than its header of ", kHeaderBytes));
  if (header[0] != kTokenFileMagic)
    throw IoError(detail::concat("token file '", path, "': magic ", header[0], ", expected ",
                                 kTokenFileMagic, " (llm.c format)"));
  if (header[1] != kTokenFileVersion)
    throw IoError(detail::concat("token file '", path, "': version ", header[1], ", expected ",
                                 kTokenFileVersion));
  const int64_t count = header[2];
  const uint64_t expected = kHeaderBytes + 2 * static_cast<uint64_t>(count < 0 ? 0 : count);
  if (count < 0 || size != expected)
    throw IoError(detail::concat("token file '", path, "': header says ", count, " tokens, so ",
                                 expected, " bytes, but the file has ", size));
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  if (!in.read(reinterpret_cast<char*>(tokens.data()), 2 * static_cast<std::streamsize>(count)))
    throw IoError(detail::concat("token file '", path, "': read failed"));
  return tokens;
}

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens) {
  MT_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), "write_token_file: ", tokens.size(),
           " tokens exceed the int32 count of the header");
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(detail::concat("cannot create token file '", path, "'"));
  out.write(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            2 * static_cast<std::streamsize>(tokens.size()));
  if (!out.flush()) throw IoError(detail::concat("write to token file '", path, "' failed"));
}

int64_t prepare_byte_tokens(const std::string& text_path, const std::string& token_path) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot open text file '", text_path, "'"));
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  std::vector<uint16_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
  write_token_file(token_path, tokens);
  return static_cast<int64_t>(tokens.size());
}

}  // namespace meshtrain

#include "meshtrain/models/token_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>

#include "meshtrain/core/error.h"

namespace meshtrain {

static_assert(std::endian::native == std::endian::little, "token files are little-endian");

namespace {
constexpr size_t kHeaderInts = 256;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);

// What llm.c writes for each format (dev/data/data_common.py's HEADERS_INFO).
struct FormatSpec {
  TokenFormat format;
  std::string_view name;
  int32_t magic;
  int32_t version;
  uint64_t width;  // bytes per token in the file
};
constexpr std::array<FormatSpec, 2> kFormats = {{
    {TokenFormat::gpt2, "gpt-2", 20240520, 1, sizeof(uint16_t)},
    {TokenFormat::llama3, "llama-3", 20240801, 7, sizeof(uint32_t)},
}};

static_assert(kFormats[0].format == TokenFormat::gpt2 && kFormats[1].format == TokenFormat::llama3,
              "kFormats is indexed by TokenFormat");
const FormatSpec& spec(TokenFormat format) { return kFormats[static_cast<size_t>(format)]; }

void write_header(std::ofstream& out, TokenFormat format, int32_t count) {
  std::array<int32_t, kHeaderInts> header{};
  header[0] = spec(format).magic;
  header[1] = spec(format).version;
  header[2] = count;
  out.write(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
}
}  // namespace

std::string_view token_format_name(TokenFormat format) { return spec(format).name; }

TokenFormat parse_token_format(std::string_view name) {
  for (const FormatSpec& f : kFormats)
    if (name == f.name) return f.format;
  throw InvalidArgument(detail::concat("unknown token format '", name,
                                       "': expected gpt-2 (llm.c's uint16 tokens) or llama-3 "
                                       "(uint32 tokens)"));
}

TokenFile read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError(detail::concat("cannot open token file '", path, "'"));
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::array<int32_t, kHeaderInts> header{};
  if (size < kHeaderBytes || !in.read(reinterpret_cast<char*>(header.data()), kHeaderBytes))
    throw IoError(detail::concat("token file '", path, "' has ", size,
                                 " bytes, fewer than its header of ", kHeaderBytes));
  const FormatSpec* format = nullptr;
  for (const FormatSpec& f : kFormats)
    if (header[0] == f.magic) format = &f;
  if (format == nullptr)
    throw IoError(detail::concat("token file '", path, "': magic ", header[0],
                                 ", expected llm.c's gpt-2 format (", spec(TokenFormat::gpt2).magic,
                                 ") or its llama-3 format (", spec(TokenFormat::llama3).magic,
                                 ")"));
  if (header[1] != format->version)
    throw IoError(detail::concat("token file '", path, "': version ", header[1], ", expected ",
                                 format->version, " for llm.c's ", format->name, " format (magic ",
                                 format->magic, ")"));
  const int64_t count = header[2];
  const uint64_t expected =
      kHeaderBytes + format->width * static_cast<uint64_t>(count < 0 ? 0 : count);
  if (count < 0 || size != expected)
    throw IoError(detail::concat("token file '", path, "': header says ", count, " ", format->name,
                                 " tokens of ", format->width, " bytes, so ", expected,
                                 " bytes, but the file has ", size));
  TokenFile file{std::vector<Token>(static_cast<size_t>(count)), format->format};
  if (format->width == sizeof(Token)) {
    in.read(reinterpret_cast<char*>(file.tokens.data()), 4 * static_cast<std::streamsize>(count));
  } else {
    // Narrow tokens a chunk at a time, so that reading needs little more than the tokens.
    std::vector<uint16_t> chunk(std::min<size_t>(file.tokens.size(), 1 << 20));
    for (size_t done = 0; done < file.tokens.size() && in; done += chunk.size()) {
      chunk.resize(std::min(chunk.size(), file.tokens.size() - done));
      in.read(reinterpret_cast<char*>(chunk.data()),
              2 * static_cast<std::streamsize>(chunk.size()));
      std::copy(chunk.begin(), chunk.end(), file.tokens.begin() + static_cast<ptrdiff_t>(done));
    }
  }
  if (!in) throw IoError(detail::concat("token file '", path, "': read failed"));
  return file;
}

std::string token_bytes(std::span<const Token> tokens, TokenFormat format) {
  if (format == TokenFormat::llama3)
    return std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size_bytes());
  std::string bytes(tokens.size() * sizeof(uint16_t), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    MT_CHECK(tokens[i] <= UINT16_MAX, "token ", tokens[i], " at position ", i,
             " does not fit llm.c's gpt-2 token format (uint16, at most 65535); write the "
             "llama-3 format (uint32 tokens)");
    const auto narrow = static_cast<uint16_t>(tokens[i]);
    std::memcpy(bytes.data() + 2 * i, &narrow, sizeof narrow);
  }
  return bytes;
}

void write_token_file(const std::string& path, const std::vector<Token>& tokens,
                      TokenFormat format) {
  MT_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), "write_token_file: ", tokens.size(),
           " tokens exceed the int32 count of the header");
  std::string bytes;
  try {
    bytes = token_bytes(tokens, format);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("token file '", path, "': ", e.what()));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(detail::concat("cannot create token file '", path, "'"));
  write_header(out, format, static_cast<int32_t>(tokens.size()));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw IoError(detail::concat("write to token file '", path, "' failed"));
}

int64_t prepare_byte_tokens(const std::string& text_path, const std::string& token_path,
                            TokenFormat format) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot open text file '", text_path, "'"));
  std::ofstream out(token_path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(detail::concat("cannot create token file '", token_path, "'"));
  write_header(out, format, 0);  // the count is known at the end
  // A chunk at a time, so that memory stays flat and a text without end (a device, a pipe) is
  // stopped at the format's limit.
  std::vector<char> bytes(1 << 20);
  std::vector<Token> tokens(bytes.size());
  int64_t count = 0;
  while (in) {
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto got = static_cast<size_t>(in.gcount());
    count += static_cast<int64_t>(got);
    if (count > INT32_MAX)
      throw IoError(detail::concat("text file '", text_path, "' holds more than ", INT32_MAX,
                                   " bytes, the most one token file counts (an int32 header)"));
    for (size_t i = 0; i < got; ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
    const std::string stored = token_bytes(std::span(tokens.data(), got), format);
    errno = 0;
    out.write(stored.data(), static_cast<std::streamsize>(stored.size()));
    if (!out)
      throw IoError(
          detail::concat("writing token file '", token_path, "' failed: ", std::strerror(errno)));
  }
  if (in.bad()) throw IoError(detail::concat("reading text file '", text_path, "' failed"));
  out.seekp(0);
  write_header(out, format, static_cast<int32_t>(count));
  if (!out.flush())
    throw IoError(
        detail::concat("writing token file '", token_path, "' failed: ", std::strerror(errno)));
  return count;
}

}  // namespace meshtrain

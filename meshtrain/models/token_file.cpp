#include "meshtrain/models/token_file.h"

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

void write_header(std::ofstream& out, int32_t count) {
  std::array<int32_t, kHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = count;
  out.write(reinterpret_cast<const char*>(header.data()), kHeaderBytes);
}
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
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(detail::concat("cannot create token file '", path, "'"));
  write_header(out, static_cast<int32_t>(tokens.size()));
  out.write(reinterpret_cast<const char*>(tokens.data()),
            2 * static_cast<std::streamsize>(tokens.size()));
  if (!out.flush()) throw IoError(detail::concat("write to token file '", path, "' failed"));
}

int64_t prepare_byte_tokens(const std::string& text_path, const std::string& token_path) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) throw IoError(detail::concat("cannot open text file '", text_path, "'"));
  std::ofstream out(token_path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(detail::concat("cannot create token file '", token_path, "'"));
  write_header(out, 0);  // the count is known at the end
  // A chunk at a time, so that memory stays flat and a text without end (a device, a pipe) is
  // stopped at the format's limit.
  std::vector<char> bytes(1 << 20);
  std::vector<uint16_t> tokens(bytes.size());
  int64_t count = 0;
  while (in) {
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const auto got = static_cast<size_t>(in.gcount());
    count += static_cast<int64_t>(got);
    if (count > INT32_MAX)
      throw IoError(detail::concat("text file '", text_path, "' holds more than ", INT32_MAX,
                                   " bytes, the most one token file counts (an int32 header)"));
    for (size_t i = 0; i < got; ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
    errno = 0;
    out.write(reinterpret_cast<const char*>(tokens.data()), 2 * static_cast<std::streamsize>(got));
    if (!out)
      throw IoError(detail::concat("writing token file '", token_path, "' failed: ",
                                   std::strerror(errno)));
  }
  if (in.bad()) throw IoError(detail::concat("reading text file '", text_path, "' failed"));
  out.seekp(0);
  write_header(out, static_cast<int32_t>(count));
  if (!out.flush())
    throw IoError(detail::concat("writing token file '", token_path, "' failed: ",
                                 std::strerror(errno)));
  return count;
}

}  // namespace meshtrain

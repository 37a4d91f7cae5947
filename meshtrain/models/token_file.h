// Token files in llm.c's format: a header of 256 little-endian int32 (magic 20240520, version 1,
// token count, the rest 0), then the tokens as little-endian uint16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshtrain {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int32_t kTokenFileVersion = 1;

// Reads the whole file; IoError naming the path for a missing file, a bad magic or version, or a
// count that does not match the file size.
std::vector<uint16_t> read_token_file(const std::string& path);
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens);

// Byte-level tokenisation (vocab 256): one token per byte of the text file, read and written a
// chunk at a time. Returns the count; IoError naming the file when a read or write fails or the
// text holds more bytes than a token file counts (INT32_MAX).
int64_t prepare_byte_tokens(const std::string& text_path, const std::string& token_path);

}  // namespace meshtrain

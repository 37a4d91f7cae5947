// Token files in llm.c's two formats: a header of 256 little-endian int32 (magic, version, token
// count, the rest 0), then the tokens, little-endian. llm.c's "gpt-2" format (magic 20240520,
// version 1) stores them as uint16; its "llama-3" format (magic 20240801, version 7) as uint32, for
// vocabularies above 65,536 (Llama 3's 128,256). In memory a token is 32 bits whatever the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace meshtrain {

using Token = uint32_t;

enum class TokenFormat { gpt2, llama3 };

// llm.c's names, "gpt-2" and "llama-3", and back: InvalidArgument listing both for another name.
std::string_view token_format_name(TokenFormat format);
TokenFormat parse_token_format(std::string_view name);

struct TokenFile {
  std::vector<Token> tokens;
  TokenFormat format = TokenFormat::gpt2;  // the one the file had
};

// Reads the whole file, in either format (told by its magic); IoError naming the path for a
// missing file, an unknown magic, a version other than its magic's, or a count that does not
// match the file size.
TokenFile read_token_file(const std::string& path);
// InvalidArgument naming the token and its position when one does not fit `format` (above 65,535
// in gpt-2), before the file is touched.
void write_token_file(const std::string& path, const std::vector<Token>& tokens,
                      TokenFormat format = TokenFormat::gpt2);

// The tokens' bytes as a token file of `format` stores them after its header: what
// write_token_file writes, and what a checkpoint's data fingerprint hashes. InvalidArgument naming
// the token and its position (in `tokens`) when one does not fit the format.
std::string token_bytes(std::span<const Token> tokens, TokenFormat format);

// Byte-level tokenisation (vocab 256): one token per byte of the text file, read and written a
// chunk at a time, in `format`. Returns the count; IoError naming the file when a read or write
// fails or the text holds more bytes than a token file counts (INT32_MAX).
int64_t prepare_byte_tokens(const std::string& text_path, const std::string& token_path,
                            TokenFormat format = TokenFormat::gpt2);

}  // namespace meshtrain

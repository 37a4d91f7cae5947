// A byte-level token file for the benchmark, written into a private temporary directory that is
// removed again when the TokenCorpus goes out of scope.
#pragma once

#include <cstdint>
#include <string>

namespace meshtrain::bench {

class TokenCorpus {
 public:
  // Concatenates the system's licence texts (or synthetic text where there are none) into at
  // least min_tokens byte tokens.
  explicit TokenCorpus(int64_t min_tokens);
  ~TokenCorpus();
  TokenCorpus(const TokenCorpus&) = delete;
  TokenCorpus& operator=(const TokenCorpus&) = delete;

  const std::string& path() const { return path_; }
  int64_t tokens() const { return tokens_; }

 private:
  std::string dir_;
  std::string path_;
  int64_t tokens_ = 0;
};

}  // namespace meshtrain::bench

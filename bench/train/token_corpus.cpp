#include "bench/train/token_corpus.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "meshtrain/core/error.h"
#include "meshtrain/models/token_file.h"

namespace meshtrain::bench {

namespace fs = std::filesystem;

namespace {

// Real text gives realistic byte statistics; sorted so that every run sees the same data.
std::string system_text() {
  std::string text;
  const fs::path dir = "/usr/share/common-licenses";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return text;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return text;
}

std::string synthetic_text() {
  std::string text;
  for (int i = 0; i < 4096; ++i)
    text += "the quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\n";
  return text;
}

}  // namespace

TokenCorpus::TokenCorpus(int64_t min_tokens) {
  std::string tmpl = (fs::temp_directory_path() / "meshtrain_fsdp_bench_XXXXXX").string();
  MT_CHECK(mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory from ", tmpl);
  dir_ = tmpl;
  path_ = (fs::path(dir_) / "tokens.bin").string();

  std::string text = system_text();
  if (text.empty()) text = synthetic_text();
  std::vector<Token> tokens;
  while (static_cast<int64_t>(tokens.size()) < min_tokens)
    for (unsigned char c : text) tokens.push_back(c);
  write_token_file(path_, tokens);
  tokens_ = static_cast<int64_t>(tokens.size());
}

TokenCorpus::~TokenCorpus() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

}  // namespace meshtrain::bench

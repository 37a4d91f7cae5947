// Helpers for the trainer and CLI tests: a scratch directory per test, token files made from text,
// a tiny run's config, and reading back the metrics file and the tensors of a safetensors file.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "meshtrain/models/safetensors.h"
#include "meshtrain/models/token_file.h"
#include "meshtrain/train/train_config.h"
#include "tests/support/scratch_dir.h"

namespace meshtrain::testing {


inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CliResult {
  int exit_code;
  std::string out, err;
};

// Runs the `meshtrain` binary at `cli` with `args` (passed through the shell as written), its
// output captured in files of `dir`.
inline CliResult run_cli(const char* cli, const ScratchDir& dir, const std::string& args) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string command = "'";  // built by appending: GCC 12 misreports long operator+ chains
  command.append(cli).append("' ").append(args);
  command.append(" >'").append(out).append("' 2>'").append(err).append("' </dev/null");
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status)) << command;
  return {WEXITSTATUS(status), read_text(out), read_text(err)};
}

// The step numbers of the progress lines a run kept: lines that end in a newline, read after the
// last carriage return (what a terminal shows once the live line has been drawn over).
inline std::vector<int> kept_progress_steps(const std::string& console) {
  std::vector<int> steps;
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // a terminal's newline is \r\n
    const size_t shown = line.rfind('\r');
    if (shown != std::string::npos) line.erase(0, shown + 1);
    int step = 0;
    if (std::sscanf(line.c_str(), "step %d/", &step) == 1) steps.push_back(step);
  }
  return steps;
}

// Some English prose, repeated: enough structure for a byte-level model to learn quickly.
inline std::string sample_prose(int repeats) {
  const std::string paragraph =
      "The quick brown fox jumps over the lazy dog. A mesh of ranks trains a small model, "
      "one step at a time, and every rank sees its own slice of the batch. ";
  std::string text;
  for (int i = 0; i < repeats; ++i) text += paragraph;
  return text;
}

// Tokens below `vocab` made from text bytes (for presets with a vocabulary smaller than 256).
inline std::vector<Token> tokens_from_text(const std::string& text, int vocab) {
  std::vector<Token> tokens;
  for (unsigned char c : text) tokens.push_back(static_cast<Token>(c % vocab));
  return tokens;
}

// A quiet run of the tiny preset (vocab 64, ctx 16, 2 blocks) on prose tokens in `dir`.
inline TrainConfig tiny_train_config(const ScratchDir& dir, int world, int64_t steps) {
  TrainConfig c;
  c.model = gpt2_model(gpt2_preset("tiny"));
  c.data_path = dir.file("tokens.bin");
  write_token_file(c.data_path, tokens_from_text(sample_prose(20), 64));
  c.steps = steps;
  c.batch = 4;
  c.seq = 16;
  c.lr.lr = 1e-3f;
  c.world = world;
  c.sample_bytes = 0;
  c.quiet = true;
  return c;
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every tensor of a safetensors file, as f32 values by key.
inline std::map<std::string, std::vector<float>> tensors_of(const std::string& path) {
  SafetensorsReader reader(path);
  std::map<std::string, std::vector<float>> out;
  for (const SafetensorsEntry& e : reader.entries()) {
    const Tensor value = Tensor::empty(e.shape);
    reader.read(e.name, value);
    out[e.name] = value.to_vector();
  }
  return out;
}

}  // namespace meshtrain::testing

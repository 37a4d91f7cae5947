// The training config file (TOML) as `meshtrain train --config FILE --print-config` reads it: every
// key applied as its flag, the run checked and written back as a config file.
#include <iostream>
#include <iterator>
#include <streambuf>

#include "meshtrain/cli/commands.h"
#include "meshtrain/models/token_file.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace meshtrain;

// A real token file for --data, made on first use and removed at exit: given on the command line
// (which overrides the file's [data] path), so that the rest of a seed's settings are checked.
const std::string& token_file() {
  struct File {
    std::string path;
    ~File() { std::remove(path.c_str()); }
  };
  static const File file = [] {
    File f{fuzz::scratch_path("config_file_tokens.bin").string()};
    write_token_file(f.path, std::vector<Token>(256, 7));
    return f;
  }();
  return file.path;
}

// Swallows --print-config's output.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Registries registries = builtin_registries();
  const std::string& path = fuzz::as_file(data, size, "config.toml");
  return fuzz::accept_or_refuse([&] {
    // A fresh command per input: a flag the file set counts as given from then on.
    CLI::App app;
    add_train_command(app, registries);
    const char* argv[] = {"meshtrain", "train",      "--data",        token_file().c_str(),
                          "--config",  path.c_str(), "--print-config"};
    NullBuffer null;
    std::streambuf* const out = std::cout.rdbuf(&null);
    struct Restore {
      std::streambuf* out;
      ~Restore() { std::cout.rdbuf(out); }
    } restore{out};
    app.parse(static_cast<int>(std::size(argv)), argv);
  });
}

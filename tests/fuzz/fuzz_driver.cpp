// The fuzz targets' own driver, for builds without libFuzzer (GCC, CI): it runs the target's
// LLVMFuzzerTestOneInput on every file of its seed corpus, then on --mutations inputs made from
// them by random edits, seeded (--seed) so that a failure reproduces. An input that crashes the
// target (a signal, an escaped exception, a sanitizer's abort) is written to --crash-input on the
// way down. scripts/fuzz.sh links the same targets to libFuzzer (clang) instead, for open-ended
// runs.
//
//   fuzz_TARGET [--mutations N] [--seed S] [--crash-input FILE] CORPUS...
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Numbers at the edges of the integer types a parser converts to, and beyond them.
constexpr const char* kEdgeNumbers[] = {
    "0", "-1", "1", "255", "65536", "2147483648", "4294967295", "4294967296", "281474976710656",
    "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
    "1e308", "-0", "0.5", "1e-9"};

// One random edit of `input`: a flipped bit, an edge byte, a removed or duplicated range, or a
// decimal number replaced by an edge number (the formats here are JSON and binary headers).
void mutate(Bytes& input, std::mt19937_64& rng) {
  const auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  switch (rng() % 5) {
    case 0:
      if (!input.empty()) input[pick(input.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1: {
      constexpr uint8_t kEdgeBytes[] = {0, 0xff, 0x7f, 0x80, '9', '-', '"', '/', '.', '[', '{'};
      if (!input.empty()) input[pick(input.size())] = kEdgeBytes[pick(std::size(kEdgeBytes))];
      break;
    }
    case 2: {
      const size_t begin = pick(input.size() + 1);
      const size_t count = pick(std::min<size_t>(input.size() - begin, 64) + 1);
      input.erase(input.begin() + begin, input.begin() + begin + count);
      break;
    }
    case 3: {
      const size_t begin = pick(input.size() + 1);
      const size_t count = pick(std::min<size_t>(input.size() - begin, 64) + 1);
      const Bytes copy(input.begin() + begin, input.begin() + begin + count);
      input.insert(input.begin() + pick(input.size() + 1), copy.begin(), copy.end());
      break;
    }
    default: {
      std::vector<std::pair<size_t, size_t>> numbers;  // runs of digits
      for (size_t i = 0; i < input.size();) {
        if (input[i] < '0' || input[i] > '9') {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < input.size() && input[j] >= '0' && input[j] <= '9') ++j;
        numbers.emplace_back(i, j);
        i = j;
      }
      if (numbers.empty()) break;
      const auto [begin, end] = numbers[pick(numbers.size())];
      const char* edge = kEdgeNumbers[pick(std::size(kEdgeNumbers))];
      input.erase(input.begin() + begin, input.begin() + end);
      input.insert(input.begin() + begin, edge, edge + std::strlen(edge));
    }
  }
}

// The input being run, for the crash handler.
const Bytes* current_input = nullptr;
const char* crash_file = nullptr;

// Writes the input being run to crash_file, then dies of the same signal. Async-signal-safe.
void keep_input_and_die(int signal) {
  if (current_input != nullptr) {
    const int fd = ::open(crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t written = ::write(fd, current_input->data(), current_input->size());
      (void)written;
      ::close(fd);
    }
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void run(const Bytes& input) {
  current_input = &input;
  LLVMFuzzerTestOneInput(input.data(), input.size());
  current_input = nullptr;
}

[[noreturn]] void usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--mutations N] [--seed S] [--crash-input FILE] CORPUS...\n",
               program);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  long long mutations = 0;
  unsigned long long seed = 1;
  std::string crash_input = "fuzz-crash-input.bin";
  std::vector<Bytes> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--mutations" || arg == "--seed" || arg == "--crash-input") && i + 1 < argc) {
      const char* value = argv[++i];
      if (arg == "--mutations") mutations = std::atoll(value);
      if (arg == "--seed") seed = std::strtoull(value, nullptr, 10);
      if (arg == "--crash-input") crash_input = value;
    } else if (arg.rfind("--", 0) == 0) {
      usage(argv[0]);
    } else if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) seeds.push_back(read_file(entry.path()));
    } else {
      seeds.push_back(read_file(arg));
    }
  }
  if (seeds.empty()) usage(argv[0]);
  crash_file = crash_input.c_str();
  for (const int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
    std::signal(signal, keep_input_and_die);
  for (const Bytes& input : seeds) run(input);

  std::mt19937_64 rng(seed);
  for (long long n = 0; n < mutations; ++n) {
    Bytes input = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) mutate(input, rng);
    run(input);
  }
  std::printf("%zu seeds and %lld mutations (seed %llu): no crash, no unexpected exception\n",
              seeds.size(), mutations, seed);
  return 0;
}

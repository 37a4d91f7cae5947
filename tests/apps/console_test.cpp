// The console as a user sees it: under a pseudo-terminal the binary keeps a progress line every
// --log-every steps and redraws a live line between them; through a pipe or a file it writes the
// kept lines only, with no carriage return or escape sequence. The sample shows as it is drawn.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/apps/apps_test_support.h"

namespace meshtrain {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

// Runs the meshtrain binary with `args` on a pseudo-terminal and returns what it wrote there.
std::string run_on_a_terminal(const std::vector<std::string>& args) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {  // the child: the terminal is its stdin, stdout and stderr
    std::vector<char*> argv = {const_cast<char*>(MESHTRAIN_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(MESHTRAIN_CLI, argv.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0) << "forkpty failed";
  std::string console;
  char buffer[4096];
  for (ssize_t got; (got = read(terminal, buffer, sizeof buffer)) > 0;) console.append(buffer, got);
  close(terminal);  // read() fails with EIO once the child has exited and closed its side
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << console;
  return console;
}

class Console : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.file("tokens.bin");
    write_token_file(tokens_, testing::tokens_from_text(testing::sample_prose(10), 256));
  }
  std::vector<std::string> train_args() const {
    return {"train",   "--data", tokens_,       "--batch", "4",        "--seq", "16",
            "--steps", "10",     "--log-every", "4",       "--sample", "0"};
  }
  ScratchDir dir_;
  std::string tokens_;
};

TEST_F(Console, OnATerminalKeepsLinesAtTheIntervalAndRedrawsBetween) {
  const std::string console = run_on_a_terminal(train_args());
  EXPECT_EQ(testing::kept_progress_steps(console), (std::vector<int>{1, 4, 8, 10})) << console;
  EXPECT_THAT(console, HasSubstr("\rstep     5/10"));  // the live line
  EXPECT_THAT(console, HasSubstr("\033[K"));
  EXPECT_THAT(console, HasSubstr("done: loss"));
}

TEST_F(Console, ThroughAPipeWritesPlainLines) {
  std::string command = "'" MESHTRAIN_CLI "'";
  for (const std::string& a : train_args()) command += " '" + a + "'";
  command += " 2>&1 | cat";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string console;
  char buffer[4096];
  for (size_t got; (got = fread(buffer, 1, sizeof buffer, pipe)) > 0;) console.append(buffer, got);
  EXPECT_EQ(pclose(pipe), 0) << console;
  EXPECT_EQ(testing::kept_progress_steps(console), (std::vector<int>{1, 4, 8, 10})) << console;
  EXPECT_EQ(console.find_first_of("\r\033"), std::string::npos) << console;
}

// --sample at its cap takes minutes on this model: its first bytes must appear long before the end
// (a sample printed whole would block the child on the full pipe instead, still running).
TEST_F(Console, TheSampleIsPrintedAsItIsDrawn) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  std::vector<std::string> args = train_args();
  args.back() = "1048576";  // --sample
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    std::vector<char*> argv = {const_cast<char*>(MESHTRAIN_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(MESHTRAIN_CLI, argv.data());
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  close(out[1]);
  std::string console;
  char buffer[4096];
  size_t at = std::string::npos;
  // 64 bytes take well under a second; the whole sample, minutes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{out[0], POLLIN, 0};
    if (poll(&ready, 1, 1000) <= 0) continue;
    const ssize_t got = read(out[0], buffer, sizeof buffer);
    if (got <= 0) break;
    console.append(buffer, got);
    at = console.find("sample:\n");
    if (at != std::string::npos && console.size() >= at + 8 + 64) break;
  }
  int status = 0;
  const pid_t ended = waitpid(pid, &status, WNOHANG);
  kill(pid, SIGKILL);
  if (ended == 0) waitpid(pid, &status, 0);
  close(out[0]);
  ASSERT_NE(at, std::string::npos) << console;
  EXPECT_GE(console.size(), at + 8 + 64) << "64 sample bytes did not come within a minute";
  EXPECT_EQ(ended, 0) << "the run had ended before 64 bytes of its sample were read:\n" << console;
  EXPECT_THAT(console, HasSubstr("done: loss"));  // the summary comes before the sample
}

}  // namespace
}  // namespace meshtrain

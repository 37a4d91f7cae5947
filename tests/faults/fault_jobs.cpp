#include "tests/faults/fault_jobs.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace meshtrain::testing {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Live (not zombie) processes of session `sid`. mpirun puts each rank in a process group of its
// own, but all of them stay in the session the job started.
std::vector<pid_t> session_processes(pid_t sid) {
  std::vector<pid_t> pids;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(entry.path() / "stat");
    const size_t comm_end = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (comm_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(comm_end + 1));
    char state = 0;
    pid_t ppid = 0, pgrp = 0, session = 0;
    fields >> state >> ppid >> pgrp >> session;
    if (session == sid && state != 'Z' && state != 'X') pids.push_back(std::stoi(name));
  }
  return pids;
}

void kill_session(pid_t sid) {
  for (pid_t pid : session_processes(sid)) ::kill(pid, SIGKILL);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

JobResult run_job(const ScratchDir& dir, const std::string& command, const JobOptions& options) {
  const std::string out_path = dir.file("job.out"), err_path = dir.file("job.err");
  const std::string shell_command = "exec " + command;
  const Clock::time_point start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return {};
  }
  if (pid == 0) {
    // A session of its own, so that every process of the job can be found afterwards; default
    // signal handling, whatever the test runner's was (a background shell ignores SIGINT).
    ::setsid();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const auto& [name, value] : options.env) ::setenv(name.c_str(), value.c_str(), 1);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execl("/bin/sh", "sh", "-c", shell_command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }

  JobResult result;
  Clock::time_point timed_from = start;
  int status = 0;
  bool continued = false;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (options.signal && !result.signalled &&
        read_file(out_path).find(options.signal_after) != std::string::npos) {
      ::kill(pid, options.signal);
      result.signalled = true;
      timed_from = Clock::now();
    }
    if (result.signalled && options.continue_after.count() > 0 && !continued &&
        Clock::now() - timed_from >= options.continue_after) {
      ::kill(pid, SIGCONT);
      continued = true;
    }
    if (Clock::now() - start > options.deadline) {
      result.hung = true;
      kill_session(pid);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.seconds = seconds_since(timed_from);
  result.exit_code = exit_code_of(status);

  // Every process of the job must end with it: mpirun's ranks, a stopped rank included.
  const Clock::time_point ended = Clock::now();
  std::vector<pid_t> alive = session_processes(pid);
  while (!alive.empty() && Clock::now() - ended < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    alive = session_processes(pid);
  }
  result.left_alive = static_cast<int>(alive.size());
  kill_session(pid);
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  return result;
}

std::vector<std::string> meshtrain_error_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("meshtrain: ", 0) == 0) lines.push_back(line);
  return lines;
}

int64_t newest_complete_step(const std::string& checkpoint_dir) {
  int64_t newest = 0;
  if (!fs::is_directory(checkpoint_dir)) return newest;
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;  // .step-N.partial: a save in progress, by design
    EXPECT_TRUE(fs::is_regular_file(entry.path() / "COMPLETE"))
        << entry.path() << " is published without its COMPLETE marker";
    newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
  }
  return newest;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace meshtrain::testing

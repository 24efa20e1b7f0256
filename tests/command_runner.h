// Test helper shared by the programs that drive the real `detseg` binary (tests/cli, tests/dist,
// tests/engine, tests/data): run a command and collect its output and exit code, start one in the
// background, wait for it with a deadline, read a small text file.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace detseg::testing {

struct CommandRun {
  int code = -1;       // exit status; -1 when killed by a signal
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr merged into stdout.
inline CommandRun run_command(const std::string& command) {
  CommandRun r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Starts `command` (through /bin/sh, exec'd so the pid is the command's) with stdout and stderr
// going to `log`; returns its pid.
inline pid_t start_background(const std::string& command, const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = "exec " + command + " > " + log.string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), nullptr);
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid` up to `seconds`; returns its wait status, or -1 (then kills it) on timeout.
inline int wait_for(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// The whole file, or "" when it cannot be read.
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace detseg::testing

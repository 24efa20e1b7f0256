#include "detseg/core/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "detseg/core/error.h"

namespace detseg {

ProcessResult run_process(const std::vector<std::string>& argv) {
  DETSEG_CHECK(!argv.empty(), "run_process: no program");
  int fds[2];
  DETSEG_CHECK(::pipe(fds) == 0, "run_process: cannot make a pipe for ", argv[0]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(str("run_process: cannot start ", argv[0]));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ProcessResult result;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) result.output.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace detseg

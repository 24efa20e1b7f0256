#include "detseg/dist/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/threads.h"

namespace detseg::dist {
namespace {

constexpr const char* kWorkerVar = "DETSEG_LAUNCHED_WORKER";
constexpr const char* kThreadsVar = "DETSEG_WORKER_THREADS";

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != '\0') continue;
    args.push_back(all.substr(start, i - start));
    start = i + 1;
  }
  DETSEG_CHECK(!args.empty(), "launcher: cannot read /proc/self/cmdline");
  return args;
}

}  // namespace

// Bind port 0 on loopback and read what the kernel chose. Rank 0's TCPStore binds it moments later
// (the usual torchrun --standalone approach).
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  DETSEG_CHECK(fd >= 0, "launcher: socket(): ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  DETSEG_CHECK(ok, "launcher: cannot find a free loopback port: ", std::strerror(errno));
  return ntohs(addr.sin_port);
}

namespace {

std::string describe(int status) {
  if (WIFEXITED(status)) return str("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::strsignal(WTERMSIG(status));
    return str("was killed by signal ", WTERMSIG(status), " (", name ? name : "?", ")");
  }
  return str("ended with wait status ", status);
}

}  // namespace

bool is_launched_worker() {
  const char* v = std::getenv(kWorkerVar);
  return v != nullptr && std::string(v) == "1";
}

int launched_worker_threads() {
  const char* v = std::getenv(kThreadsVar);
  return is_launched_worker() && v != nullptr ? std::atoi(v) : 0;
}

int launch_local_workers(int nproc) {
  const char* world = std::getenv("WORLD_SIZE");
  DETSEG_CONFIG_CHECK(world == nullptr || *world == '\0', "--nproc ", nproc, " with WORLD_SIZE=", world,
                      " already set: use either --nproc (local launch) or torchrun-style variables, not both");
  std::vector<std::string> args = own_command_line();
  bool threads_given = false;
  for (const auto& a : args) threads_given = threads_given || a == "--threads" || a.rfind("--threads=", 0) == 0;
  const int port = pick_free_port();
  const int threads = std::max(1, hardware_threads() / nproc);
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = ::fork();
    DETSEG_CHECK(pid >= 0, "launcher: fork(): ", std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a launcher that was killed
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv(kWorkerVar, "1", 1);
      if (!threads_given) ::setenv(kThreadsVar, std::to_string(threads).c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "detseg: launcher: exec /proc/self/exe failed: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }
  log_info("launched ", nproc, " workers (ranks 0..", nproc - 1, ", rendezvous 127.0.0.1:", port,
           threads_given ? std::string() : str(", ", threads, " threads each"), ")");

  auto rank_of = [&](pid_t pid) {
    for (size_t r = 0; r < pids.size(); ++r)
      if (pids[r] == pid) return static_cast<int>(r);
    return -1;
  };
  // Ctrl-C reaches the workers directly (same process group); a SIGTERM sent to the launcher alone
  // is passed on. Either way each worker finishes its step, rank 0 saves a checkpoint, and they exit
  // 128+signal together, which is not a failure to clean up after. The launcher forwards SIGTERM,
  // never SIGINT: a worker's second SIGINT means "stop without saving".
  install_stop_handlers();
  bool forwarded = false;
  int running = nproc;
  int exit_code = 0;
  while (running > 0) {
    if (stop_signal() != 0 && !forwarded) {
      forwarded = true;
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const int r = rank_of(pid);
    if (r < 0) continue;
    pids[static_cast<size_t>(r)] = -1;
    --running;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    if (code == 128 + SIGINT || code == 128 + SIGTERM) {
      if (exit_code == 0) exit_code = code;
      continue;
    }
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    std::fprintf(stderr, "detseg: error: worker rank %d (pid %d) %s; stopping the other %d worker(s)\n", r,
                 static_cast<int>(pid), describe(status).c_str(), running);
    std::fflush(stderr);
    // Give the others a moment to notice the failed collective and exit with their own error.
    for (pid_t p : pids)
      if (p > 0) {
        ::kill(p, SIGTERM);
        ::kill(p, SIGCONT);  // a stopped (hung) worker only acts on SIGTERM once it runs again
      }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (running > 0) {
      pid_t done = ::waitpid(-1, &status, WNOHANG);
      if (done > 0) {
        const int k = rank_of(done);
        if (k >= 0) {
          pids[static_cast<size_t>(k)] = -1;
          --running;
        }
        continue;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids)
          if (p > 0) ::kill(p, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return exit_code;
}

}  // namespace detseg::dist

#include "detseg/core/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace detseg {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signal) {
  if (g_stop_signal != 0 && signal == SIGINT) {
    // A second Ctrl-C: the user does not want to wait for the checkpoint.
    static const char message[] = "\ndetseg: second interrupt, stopping now without saving\n";
    const ssize_t ignored = ::write(2, message, sizeof(message) - 1);
    (void)ignored;
    ::_exit(128 + SIGINT);
  }
  if (g_stop_signal == 0) g_stop_signal = signal;
}

}  // namespace

void install_stop_handlers() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and waits carry on; loops poll stop_signal()
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return g_stop_signal; }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

void throw_if_stop_requested(const std::string& what) {
  if (const int signal = stop_signal()) throw Interrupted(signal, what + " stopped by " + signal_name(signal));
}

}  // namespace detseg

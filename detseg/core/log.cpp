#include "detseg/core/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace detseg {

static LogLevel g_level = LogLevel::kInfo;
static std::mutex g_mutex;

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

void log_line(LogLevel level, const std::string& message) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", std::localtime(&now));
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[%s %s] %s\n", stamp, names[static_cast<int>(level)], message.c_str());
}

}  // namespace detseg

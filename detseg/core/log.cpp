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

static std::FILE* g_file = nullptr;

namespace {
std::string stamp(const char* format) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char text[32];
  std::strftime(text, sizeof(text), format, std::localtime(&now));
  return text;
}
}  // namespace

void log_line(LogLevel level, const std::string& message) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  const std::string time = stamp("%H:%M:%S");
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[%s %s] %s\n", time.c_str(), names[static_cast<int>(level)], message.c_str());
  if (g_file) {
    std::fprintf(g_file, "[%s %s] %s\n", stamp("%Y-%m-%d %H:%M:%S").c_str(), names[static_cast<int>(level)], message.c_str());
    std::fflush(g_file);
  }
}

void log_to_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_file) std::fclose(g_file);
  g_file = path.empty() ? nullptr : std::fopen(path.c_str(), "a");
  if (!path.empty() && g_file == nullptr)
    std::fprintf(stderr, "[%s warn] cannot append to %s; logging to the terminal only\n", stamp("%H:%M:%S").c_str(),
                 path.c_str());
}

void print_output(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  append_to_log_file(text);
}

void append_to_log_file(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_file) return;
  std::fputs(text.c_str(), g_file);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', g_file);
  std::fflush(g_file);
}

}  // namespace detseg

// Implements: minimal leveled logging to stderr with a timestamp, optionally copied to a log file.
// No framework: a few functions.
#pragma once

#include <string>

#include "detseg/core/error.h"

namespace detseg {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

// From now on every log line, every print_output text and every append_to_log_file text also goes
// to the end of `path` (the model dir's train.log / eval.log), with the date; "" stops that. What
// the terminal shows live (progress bars) is left out.
void log_to_file(const std::string& path);
// A command's result: printed to stdout and appended to the log file.
void print_output(const std::string& text);
// Appended to the log file only (e.g. the final error line, which main prints itself).
void append_to_log_file(const std::string& text);

template <typename... Args>
void log_info(Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_line(LogLevel::kInfo, str(std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(Args&&... args) {
  if (log_level() <= LogLevel::kWarn) log_line(LogLevel::kWarn, str(std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_line(LogLevel::kDebug, str(std::forward<Args>(args)...));
}

}  // namespace detseg

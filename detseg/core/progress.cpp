#include "detseg/core/progress.h"

#include <unistd.h>

#include <cstdio>

#include "detseg/core/log.h"

namespace detseg {

Progress::Progress(std::string what, int64_t first, int64_t last, std::string unit)
    : what_(std::move(what)), unit_(std::move(unit)), first_(first), last_(last), tty_(::isatty(2)),
      start_(std::chrono::steady_clock::now()), last_draw_() {}

void Progress::report(int64_t done, const std::string& values, bool log_line) {
  const auto now = std::chrono::steady_clock::now();
  const bool final = done == last_;
  // A terminal is redrawn at most 10 times a second: eval and predict report every image.
  const bool draw = tty_ && (final || log_line || now - last_draw_ >= std::chrono::milliseconds(100));
  if (!draw && !log_line) return;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double per_item = done > first_ ? elapsed / static_cast<double>(done - first_) : 0;
  const double eta = per_item * static_cast<double>(last_ - done);
  // An unknown total (a live stream): the count and the rate, no ETA.
  const std::string line =
      last_ < first_ ? str(what_, " ", done, values.empty() ? "" : " ", values, " ", per_item > 0 ? 1.0 / per_item : 0.0,
                           " ", unit_)
                     : str(what_, " ", done, "/", last_, values.empty() ? "" : " ", values, " ",
                           per_item > 0 ? 1.0 / per_item : 0.0, " ", unit_, " eta ", static_cast<int64_t>(eta), "s");
  if (draw) {
    last_draw_ = now;
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    if (final) std::fprintf(stderr, "\n");
    std::fflush(stderr);
    if (log_line) append_to_log_file(line);
  } else {
    log_info(line);
  }
}

void Progress::end_line() const {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace detseg

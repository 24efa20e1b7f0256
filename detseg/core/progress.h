// Implements: the live progress line of long commands (training steps, evaluated and predicted
// images): done/total, rate and ETA, redrawn in place on a terminal. Off a terminal nothing is
// redrawn; callers that want a record log a plain line instead (log_line = true).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace detseg {

class Progress {
 public:
  // `what` ("step", "eval", "predict") starts the line; `unit` names the rate ("steps/s", "img/s").
  // `last` < `first`: the total is unknown (a live stream); the line shows no total and no ETA.
  Progress(std::string what, int64_t first, int64_t last, std::string unit);

  // `done` of `last` finished; `values` is shown after the count. With `log_line` the line is also
  // logged (the only output off a terminal).
  void report(int64_t done, const std::string& values = "", bool log_line = false);
  // Ends a live line early (a stop mid-run), so the next message starts on its own line.
  void end_line() const;

 private:
  std::string what_, unit_;
  int64_t first_, last_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace detseg

// Implements: a graceful stop on SIGINT/SIGTERM. The first signal is only recorded; long loops
// (training steps, evaluation and prediction batches) poll it at a safe point, save what they must
// and end with exit status 128+signal. A second SIGINT ends the process at once.
#pragma once

#include <string>

#include "detseg/core/error.h"

namespace detseg {

// Installs the handlers (idempotent). Until then SIGINT/SIGTERM keep their default effect.
void install_stop_handlers();

// The first stop signal received (SIGINT, SIGTERM), or 0.
int stop_signal();

// Thrown at a safe point after a stop signal; the CLI turns it into exit status 128+signal.
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& what) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Throws Interrupted("<what> stopped by SIGINT") when a stop signal has arrived.
void throw_if_stop_requested(const std::string& what);

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

}  // namespace detseg

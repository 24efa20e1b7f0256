// Implements: run_process, running another program (found on PATH) to completion with its output
// captured. `detseg export --format onnx` uses it for the Python converter (torch.onnx).
#pragma once

#include <string>
#include <vector>

namespace detseg {

struct ProcessResult {
  int status = 0;      // exit code; 128 + N when killed by signal N; 127 when it could not start
  std::string output;  // its stdout and stderr, interleaved
};

ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace detseg

// Implements: how LibTorch's OpenMP threads wait for the next parallel region, chosen from the
// machine's load when a run starts. A training step opens thousands of parallel regions; between
// them each thread spins, then sleeps. Spinning is fastest on free cores and slowest on shared
// ones, where the spinner takes the time another job (or our own loader) needs. Measured on a
// 2-core x86-64 machine with the RetinaNet-R18 demo step, 2 threads (docs/cli.md): quiet, 2.15
// steps/s spinning 10000 iterations against 1.78 sleeping at once; two such runs at once, 0.77
// steps/s each spinning against 1.07 sleeping.
#pragma once

#include <string>

namespace detseg {

struct OpenMpWait {
  std::string variable;  // the libgomp environment variable to set: GOMP_SPINCOUNT or OMP_WAIT_POLICY
  std::string value;
  std::string reason;    // for `detseg info`: "chosen from the load at start: 0.20 other
                         // runnable threads, 2 CPUs, 2 threads"
};

// load: the threads other jobs keep busy when the run starts (runnable_threads_now); cpus:
// logical CPUs; threads: the run's intra-op threads. Where the run's threads fit beside the load,
// a 10000-iteration spin (a few tens of microseconds); otherwise sleep at once (passive).
OpenMpWait openmp_wait_for_load(double load, int cpus, int threads);

// Other processes' runnable threads now: /proc/stat's procs_running (which counts the reader
// itself) averaged over five samples 5 ms apart. The 1-minute load average would remember a job
// that has just ended: after a 2-thread job it takes ~80 s to fall below half a CPU, and a
// benchmark started in that time would run its threads passive on an idle machine. Falls back to
// the 1-minute average where /proc/stat cannot be read.
double runnable_threads_now();

// "GOMP_SPINCOUNT=10000 (chosen from the load at start: ...)": the waiting this process runs
// with and why, for `detseg info` and train.log.
std::string openmp_wait_in_effect();

}  // namespace detseg

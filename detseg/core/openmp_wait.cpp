#include "detseg/core/openmp_wait.h"

#include <cstdio>

namespace detseg {

OpenMpWait openmp_wait_for_load(double load, int cpus, int threads) {
  char reason[128];
  std::snprintf(reason, sizeof reason, "chosen from the load at start: %.2f, %d CPUs, %d threads", load, cpus,
                threads);
  // Half a CPU of slack: a shell, an editor or a finished job's tail leaves the average near 0.3.
  if (load + threads <= cpus + 0.5) return {"GOMP_SPINCOUNT", "10000", reason};
  return {"OMP_WAIT_POLICY", "passive", reason};
}

}  // namespace detseg

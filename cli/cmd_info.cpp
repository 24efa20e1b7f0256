// Implements: `detseg info`: versions, threads, BLAS and CUDA availability; or the config keys.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "detseg/core/cpu_info.h"
#include "detseg/core/malloc_reuse.h"
#include "detseg/core/openmp_wait.h"
#include "detseg/engine/device.h"

namespace detseg::cli {

int run_info(const InfoArgs& args) {
  if (run_config_info(args)) return 0;
  std::printf("detseg %s\n", DETSEG_VERSION);
  std::printf("torch %s\n", TORCH_VERSION);
  std::printf("threads %d\n", at::get_num_threads());
  // The kernel sets decide how sums round, so results differ a little between CPUs (docs/cli.md).
  std::printf("machine %s\n", machine_summary().c_str());
  // How OpenMP's threads wait between parallel regions moves every timing (docs/cli.md).
  std::printf("openmp waiting %s\n", openmp_wait_in_effect().c_str());
  std::printf("malloc %s\n", keep_freed_memory_for_reuse().c_str());
  std::printf("cuda %s\n", at::hasCUDA() ? "available" : "not available");
  std::printf("\n%s", at::get_parallel_info().c_str());
  std::printf("\n%s\n", at::show_config().c_str());
  return 0;
}

}  // namespace detseg::cli

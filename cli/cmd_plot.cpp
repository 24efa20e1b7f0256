// Implements: `detseg plot RUN_DIR [--out DIR]`: PNG charts of a training run's metrics logs.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/viz/plot.h"

namespace detseg::cli {

int run_plot(const PlotArgs& args) {
  // A wrong argument is a usage error (2); a run dir without readable logs is a runtime failure (1).
  DETSEG_CONFIG_CHECK(is_directory(args.run_dir), args.run_dir, ": run directory not found");
  PlotOptions options;
  options.width = args.width;
  options.height = args.height;
  const std::string out = args.out_dir.empty() ? args.run_dir + "/plots" : args.out_dir;
  for (const std::string& path : plot_run(args.run_dir, out, options)) std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace detseg::cli

// Implements: `detseg export --config C --checkpoint P --format safetensors -o OUT`.
#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/log.h"
#include "detseg/engine/export.h"

namespace detseg::cli {

int run_export(const ExportArgs& args) {
  const PipelineConfig config = load_config(args.config, args.overrides);
  ExportOptions options;
  options.checkpoint = args.checkpoint;
  options.format = args.format;
  options.output = args.output;
  const ExportResult r = export_model(config, options);
  print_output(str("exported step ", r.step, " of ", args.checkpoint, ": ", r.num_tensors, " tensors (", r.num_values,
                   " values) to ", args.output, "\n"));
  return 0;
}

}  // namespace detseg::cli

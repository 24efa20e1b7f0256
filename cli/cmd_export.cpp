// Implements: `detseg export --config C --checkpoint P --format torchscript|onnx|safetensors -o OUT`.
#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/log.h"
#include "detseg/engine/export.h"
#include "detseg/engine/memory.h"

namespace detseg::cli {

int run_export(const ExportArgs& args) {
  guard_cpu_allocations();  // a block larger than the memory left fails with its size, not the OOM killer
  const PipelineConfig config = load_config(args.config, args.overrides);
  ExportOptions options;
  options.checkpoint = args.checkpoint;
  options.format = args.format;
  options.output = args.output;
  options.height = args.height;
  options.width = args.width;
  const ExportResult r = export_model(config, options);
  std::string traced;
  if (r.height > 0) {
    traced = str(", input images [1, 3, ", r.height, ", ", r.width, "], outputs");
    for (const std::string& name : r.outputs) traced += " " + name;
    for (const std::string& graph : r.graphs) traced += "; " + graph;
  }
  std::string files = args.output;
  for (const std::string& file : r.files) files += " and " + file;  // ONNX: a file per later graph
  print_output(str("exported step ", r.step, " of ", args.checkpoint, " as ", args.format, ": ", r.num_tensors,
                   " tensors (", r.num_values, " values)", traced, " to ", files, "\n"));
  return 0;
}

}  // namespace detseg::cli

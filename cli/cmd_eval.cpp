// Implements: `detseg eval`: COCO metrics (detectors) or mIoU (segmenters) and eval losses of one checkpoint, or of every new
// checkpoint of a training run (--continuous).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/stop_signal.h"
#include "detseg/engine/evaluate.h"
#include "detseg/train/checkpoint.h"

namespace detseg::cli {

int run_eval(const EvalArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM end the run at a safe point (see stop_signal.h)
  PipelineConfig config = load_config(args.config, args.overrides);
  DETSEG_CONFIG_CHECK(!config.eval_input.annotations.empty(), args.config,
                      ": eval_input.annotations is required to evaluate");
  if (args.continuous) {
    std::string dir = !args.checkpoint_dir.empty() ? args.checkpoint_dir : args.model_dir;
    DETSEG_CONFIG_CHECK(!dir.empty(), "--continuous needs --checkpoint-dir (or --model-dir)");
    log_to_file(dir + "/eval.log");
    evaluate_continuously(config, dir, args.wait_interval);
    return 0;
  }
  std::string checkpoint = args.checkpoint;
  if (checkpoint.empty()) {
    DETSEG_CONFIG_CHECK(!args.model_dir.empty(), "give --checkpoint or --model-dir");
    CheckpointManagerOptions options;
    options.model_dir = args.model_dir;
    auto latest = CheckpointManager(options).latest();
    DETSEG_CHECK(latest.has_value(), args.model_dir, ": no checkpoint in this folder");
    checkpoint = *latest;
  }
  // The checkpoint's folder (the model dir) keeps a log of its evaluations.
  const std::string folder = std::filesystem::path(checkpoint).parent_path().string();
  const std::string model_dir = folder.empty() ? std::string(".") : folder;
  log_to_file(model_dir + "/eval.log");
  append_to_log_file(str("detseg eval --config ", args.config, " --checkpoint ", checkpoint));
  EvalReport report = evaluate_checkpoint(config, checkpoint, nullptr, /*per_class=*/true, !args.no_metrics);
  print_output(str(checkpoint, ": step ", report.step, ", ", report.num_images, " images\n", report.text));
  if (!args.json_out.empty()) write_file_atomic(args.json_out, report.json);
  if (!report.detections.empty()) {
    std::string path = args.detections_out;
    if (path.empty()) {
      make_directories(model_dir + "/eval");
      path = str(model_dir, "/eval/detections-", report.step, ".json");
    }
    write_file_atomic(path, report.detections);
    print_output(str(report.num_detections, " detections (COCO results format) written to ", path, "\n"));
  }
  return 0;
}

}  // namespace detseg::cli

// Implements: `detseg eval`: COCO metrics (detectors) or mIoU (segmenters) and eval losses of one checkpoint, or of every new
// checkpoint of a training run (--continuous).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
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
  EvalReport report = evaluate_checkpoint(config, checkpoint, nullptr, /*per_class=*/true, !args.no_metrics);
  std::printf("%s: step %lld, %lld images\n%s", checkpoint.c_str(), static_cast<long long>(report.step),
              static_cast<long long>(report.num_images), report.text.c_str());
  if (!args.json_out.empty()) write_file_atomic(args.json_out, report.json);
  if (!report.detections.empty()) {
    std::string path = args.detections_out;
    if (path.empty()) {
      const std::string dir = std::filesystem::path(checkpoint).parent_path().string();
      make_directories((dir.empty() ? std::string(".") : dir) + "/eval");
      path = str(dir.empty() ? std::string(".") : dir, "/eval/detections-", report.step, ".json");
    }
    write_file_atomic(path, report.detections);
    std::printf("%lld detections (COCO results format) written to %s\n", static_cast<long long>(report.num_detections),
                path.c_str());
  }
  return 0;
}

}  // namespace detseg::cli

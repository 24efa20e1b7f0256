// Implements: `detseg predict`: detections JSON and drawings, or label-map PNGs, for an image or a folder.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/stop_signal.h"
#include "detseg/engine/predict.h"

namespace detseg::cli {

int run_predict(const PredictArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM end the run at a safe point (see stop_signal.h)
  PipelineConfig config = load_config(args.config, args.overrides);
  PredictOptions options;
  options.checkpoint = args.checkpoint;
  options.input = args.input;
  options.output = args.output;
  options.score_threshold = args.score_threshold;
  int64_t n = predict_images(config, options);
  std::printf("predicted %lld images into %s (detections.json or segmentation.json, and PNGs per image)\n",
              static_cast<long long>(n),
              args.output.c_str());
  return 0;
}

}  // namespace detseg::cli

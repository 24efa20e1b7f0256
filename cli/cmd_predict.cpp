// Implements: `detseg predict`: detections JSON and drawings, or label-map PNGs, for an image or a folder;
// detections JSON Lines and the annotated video for a video file, camera or stream.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/stop_signal.h"
#include "detseg/engine/export.h"
#include "detseg/engine/memory.h"
#include "detseg/api/predict.h"

namespace detseg::cli {

int run_predict(const PredictArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM end the run at a safe point (see stop_signal.h)
  guard_cpu_allocations();  // a block larger than the memory left fails with its size, not the OOM killer
  // An exported TorchScript model carries its config; --config (with overrides) replaces it.
  PipelineConfig config;
  if (!args.config.empty()) {
    config = load_config(args.config, args.overrides);
  } else {
    DETSEG_CONFIG_CHECK(is_exported_model(args.checkpoint), "predict: --config is required unless --checkpoint is a "
                        "model from `detseg export --format torchscript`; ", args.checkpoint, " is not one");
    DETSEG_CONFIG_CHECK(args.overrides.empty(), "predict: overrides need --config");
    config = read_exported_model_info(args.checkpoint).config;
  }
  PredictOptions options;
  options.checkpoint = args.checkpoint;
  options.input = args.input;
  options.output = args.output;
  options.score_threshold = args.score_threshold;
  options.batch = args.batch;
  options.every_nth_frame = args.every_nth_frame;
  options.draw = !args.no_draw;
  // --tile and --tile-overlap set the config's keys, so an exported model's config takes them too.
  if (args.tile >= 0) config.postprocess.tile_size = args.tile;
  if (args.tile_overlap >= 0) config.postprocess.tile_overlap = args.tile_overlap;
  check_model_fits_in_memory(config, ModelUse::kInference);
  const bool video = is_video_input(options.input);
  int64_t n = predict_images(config, options);
  if (video) {
    std::printf("predicted %lld frames of %s into %s (detections.jsonl%s)\n", static_cast<long long>(n),
                args.input.c_str(), args.output.c_str(), options.draw ? ", annotated.mp4" : "");
  } else {
    std::printf("predicted %lld images into %s (detections.json or segmentation.json, images.json%s)\n",
                static_cast<long long>(n), args.output.c_str(), options.draw ? ", and PNGs per image" : "; --no-draw: no pictures");
  }
  return 0;
}

}  // namespace detseg::cli

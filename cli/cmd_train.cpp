// Implements: `detseg train`: load the config, train (resuming from --model-dir), then evaluate the
// final weights on eval_input when it is set.
#include <cstdio>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"

namespace detseg::cli {

int run_train(const TrainArgs& args) {
  PipelineConfig config = load_config(args.config, args.overrides);
  DETSEG_CONFIG_CHECK(args.nproc == 1, "--nproc ", args.nproc,
                      ": data-parallel training is not built yet; run with --nproc 1");
  TrainResult result = train_detector(config, args.model_dir);
  std::printf("trained to step %lld, loss %.4f (first step of this run %.4f), checkpoint %s\n",
              static_cast<long long>(result.step), result.last_loss, result.first_loss,
              result.last_checkpoint.c_str());
  if (!config.eval_input.annotations.empty() && !result.last_checkpoint.empty()) {
    int64_t step = 0;
    auto model = load_detector(config, result.last_checkpoint, &step);
    DetectionEvalResult eval = evaluate_detector(config, *model);
    eval.step = step;
    std::printf("evaluation of step %lld on %lld images:\n%s", static_cast<long long>(step),
                static_cast<long long>(eval.num_images), eval_result_text(eval, true).c_str());
    write_file_atomic(args.model_dir + "/eval-final.json", eval_result_json(eval));
  }
  return 0;
}

}  // namespace detseg::cli

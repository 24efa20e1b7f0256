// Implements: `detseg train`: load the config, train (resuming from --model-dir), then evaluate the
// final weights on eval_input when it is set.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/threads.h"
#include "detseg/dist/launch.h"
#include "detseg/dist/process_group.h"
#include "detseg/engine/device.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"

namespace detseg::cli {
namespace {
std::string fixed4(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f", x);
  return text;
}
}  // namespace

int run_train(const TrainArgs& args) {
  install_stop_handlers();  // SIGINT/SIGTERM end the run at a safe point (see stop_signal.h)
  PipelineConfig config = load_config(args.config, args.overrides);
  // --nproc N: this process only launches N workers (this same command line) and waits. Without
  // --nproc, a run on the GPU (device auto or cuda, not cuda:N) takes every visible GPU, one worker
  // each, as torchrun --nproc_per_node=gpu would; each worker's LOCAL_RANK picks its GPU.
  int nproc = args.nproc;
  if (nproc == 0 && !dist::is_launched_worker() && std::getenv("WORLD_SIZE") == nullptr &&
      (config.device == "auto" || config.device == "cuda") && resolve_device(config.device).is_cuda())
    nproc = visible_gpu_count();
  if (nproc > 1 && !dist::is_launched_worker()) return dist::launch_local_workers(nproc);
  if (int threads = dist::launched_worker_threads(); threads > 0) set_threads(threads);
  TrainResult result = train_model(config, args.model_dir);
  // Data-parallel: every rank waits for rank 0's final checkpoint, evaluates its shard, and rank 0
  // reports the merged result.
  if (result.group) result.group->barrier();
  if (result.main_process)
    print_output(str("trained to step ", result.step, ", loss ", fixed4(result.last_loss), " (first step of this run ",
                     fixed4(result.first_loss), "), checkpoint ", result.last_checkpoint, "\n"));
  if (!evaluation_sets(config).empty() && !result.last_checkpoint.empty()) {
    // The loop's evaluation of the last step scored these same weights (EMA averages swapped in,
    // as the checkpoint holds them); without one, the final checkpoint is evaluated here.
    const std::vector<EvalReport> evals =
        !result.final_evaluations.empty()
            ? result.final_evaluations
            : evaluate_checkpoint_on_sets(config, result.last_checkpoint, result.group.get());
    if (!evals[0].main_process) return 0;
    print_output(str("evaluation of step ", evals[0].step, ":\n", eval_reports_text(evals)));
    for (const EvalReport& eval : evals) {
      const std::string set = eval.set_name.empty() ? "" : "-" + eval.set_name;
      write_file_atomic(args.model_dir + "/eval-final" + set + ".json", eval.json);
      if (!eval.detections.empty())
        write_file_atomic(args.model_dir + "/detections-final" + set + ".json", eval.detections);
      // The evaluation pictures (eval.pictures) of the final weights, as `detseg eval` writes them.
      if (!write_report_pictures(eval, args.model_dir + "/eval").empty())
        print_output(str("evaluation pictures written to ", pictures_dir(args.model_dir + "/eval", eval), "/\n"));
    }
  }
  return 0;
}

}  // namespace detseg::cli

// Implements: `detseg train`: load the config, train (resuming from --model-dir), then evaluate the
// final weights on eval_input when it is set.
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/stop_signal.h"
#include "detseg/core/files.h"
#include "detseg/core/threads.h"
#include "detseg/dist/launch.h"
#include "detseg/dist/process_group.h"
#include "detseg/engine/device.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/train_loop.h"

namespace detseg::cli {

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
    std::printf("trained to step %lld, loss %.4f (first step of this run %.4f), checkpoint %s\n",
                static_cast<long long>(result.step), result.last_loss, result.first_loss,
                result.last_checkpoint.c_str());
  if (!config.eval_input.annotations.empty() && !result.last_checkpoint.empty()) {
    EvalReport eval = evaluate_checkpoint(config, result.last_checkpoint, result.group.get());
    if (!eval.main_process) return 0;
    std::printf("evaluation of step %lld on %lld images:\n%s", static_cast<long long>(eval.step),
                static_cast<long long>(eval.num_images), eval.text.c_str());
    write_file_atomic(args.model_dir + "/eval-final.json", eval.json);
    if (!eval.detections.empty()) write_file_atomic(args.model_dir + "/detections-final.json", eval.detections);
  }
  return 0;
}

}  // namespace detseg::cli

// Implements: the training loop: batch -> losses -> backward -> clip -> step -> schedule -> EMA, then
// explicit, ordered calls to save checkpoints, log, and evaluate. Resumes from model_dir's latest
// checkpoint, or fine-tunes from train.fine_tune when model_dir has none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/engine/evaluate.h"

namespace detseg {
namespace dist {
class ProcessGroup;
}

struct TrainResult {
  int64_t step = 0;             // steps done in total (resumed ones included)
  std::string last_checkpoint;  // path of the final checkpoint
  double last_loss = 0;         // total loss of the last step
  double first_loss = 0;        // total loss of the first step run in this process
  bool main_process = true;     // rank 0 of a data-parallel run (the one that writes)
  std::shared_ptr<dist::ProcessGroup> group;  // data-parallel runs: for the sharded final evaluation
  // The periodic evaluation of the last step (eval.every_steps divides train.num_steps), per class:
  // the final weights' scores, so `detseg train` reports these instead of evaluating them twice.
  std::vector<EvalReport> final_evaluations;
};

// Trains the model config.model.type names, detector or segmenter, on config.train_input.
TrainResult train_model(const PipelineConfig& config, const std::string& model_dir);

}  // namespace detseg

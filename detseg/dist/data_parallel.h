// Implements: data-parallel training on a ProcessGroup, as the few calls train_loop makes: connect
// from torchrun's environment, broadcast rank 0's parameters and buffers, average gradients in
// flat buckets (launched from gradient hooks while backward still runs, in a fixed bucket order
// so every rank issues the same collectives), and re-derive the loader position when a run
// resumes with another world size. Without WORLD_SIZE (or WORLD_SIZE=1) every call is a no-op.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/data/loader.h"
#include "detseg/dist/process_group.h"
#include "detseg/train/torch_fwd.h"

namespace detseg::dist {

// Flat-bucket gradient averaging (sum over ranks / world size, the reference's loss/num_replicas
// then SUM). Buckets follow reverse parameter order, roughly the order backward produces them.
class GradientAverager {
 public:
  // overlap: launch each bucket from the gradient hooks as soon as it is full (during backward);
  // false launches all of them in finish() (needed when backward issues collectives of its own,
  // as synchronised batch norm does, so every rank's collectives keep one order).
  GradientAverager(ProcessGroup& group, std::vector<at::Tensor> params, double bucket_mb, bool overlap = true);
  ~GradientAverager();
  GradientAverager(const GradientAverager&) = delete;
  GradientAverager& operator=(const GradientAverager&) = delete;

  // After backward: launches the buckets the hooks have not, waits for all, writes the averages
  // into each parameter's .grad. A parameter without a gradient this step contributes zeros.
  void finish();
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  double last_wait_seconds() const { return last_wait_seconds_; }  // blocked in finish(), last step
  double last_span_seconds() const { return last_span_seconds_; }  // first bucket launch to last done

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;
    at::Tensor flat;
    size_t filled = 0;
    bool launched = false;
    Pending pending;
  };
  void on_gradient(size_t param, const at::Tensor& grad);
  void launch_ready();  // in bucket order, stopping at the first not-ready bucket

  ProcessGroup& group_;
  std::vector<at::Tensor> params_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<char> seen_;                          // param got its gradient this step
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  bool overlap_ = true;
  std::mutex mutex_;
  std::vector<std::pair<size_t, unsigned>> hooks_;  // (param, handle)
  double last_wait_seconds_ = 0, last_span_seconds_ = 0;
  std::chrono::steady_clock::time_point first_launch_;
};

class DataParallel {
 public:
  // Connects when WORLD_SIZE > 1; `device` (the run's) picks the backends (use_nccl).
  explicit DataParallel(const DistributedConfig& config, const at::Device& device = at::kCPU);
  ~DataParallel();

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  ProcessGroup* group() { return group_.get(); }
  std::shared_ptr<ProcessGroup> shared_group() const { return group_; }

  // Every rank must resume the same step (model_dir shared); returns it or throws Error.
  int64_t agree_on_step(int64_t step);
  void broadcast_module(torch::nn::Module& module);  // parameters and buffers from rank 0
  // train.distributed.sync_batch_norm: every trainable Norm2d of `module` normalises over the global
  // batch (an all-reduce per layer in forward and backward). Call before attach(). Returns the
  // number of layers synchronised (0 in one process or when the config leaves it off).
  int synchronise_batch_norm(torch::nn::Module& module);
  void attach(const std::vector<at::Tensor>& params);  // gradient hooks on the trainable tensors
  void average_gradients();                            // after backward
  // What the ranks agree on after each step (one all-reduce of world_size + 1 doubles on the CPU;
  // every rank must call it): the lowest rank that reports a failed step (`failed_step` >= 0; -1:
  // none) with that step, and whether any rank was asked to stop (SIGINT/SIGTERM). Every rank then
  // stops at the same step, instead of the others waiting for the missing one at the next
  // collective until the timeout.
  struct StepVote {
    int failed_rank = -1;
    int64_t failed_step = -1;
    bool stop = false;
  };
  StepVote vote(int64_t failed_step, bool stop_requested);
  // Replaces each value by its mean over the ranks (one all-reduce; every rank must call it).
  void average_across_ranks(std::vector<std::pair<std::string, double>>& values);
  // `metadata_json` plus the run's shape {"world_size", "batch_size"} for resume_start_batch.
  std::string checkpoint_metadata(const std::string& metadata_json, int64_t batch_size) const;
  // For the metrics: time blocked on all-reduce after backward (not hidden by overlap), and the time
  // from the first bucket's launch to the last bucket's completion.
  std::vector<std::pair<std::string, double>> step_timings() const;

 private:
  DistributedConfig config_;
  Environment env_;
  std::shared_ptr<ProcessGroup> group_;
  std::unique_ptr<GradientAverager> averager_;
  bool sync_batch_norm_ = false;
};

// The loader's start_batch for a run resuming at `step` from a checkpoint written with
// (saved_world_size, saved_batch_size): the same epoch, and within it the first global batch not
// fully consumed (examples are taken in the epoch's shuffled order, so a different world size or
// batch continues with the same remaining examples, rounding up to a whole global batch).
// `num_examples` is the epoch's example count (after sample_1_of_n).
int64_t resume_start_batch(int64_t step, int64_t saved_world_size, int64_t saved_batch_size, int64_t num_examples,
                           int64_t world_size, int64_t batch_size, bool drop_last);

// The same for the loader `options` (batch, rank, world size) of this run, reading the saved world
// size and batch from `checkpoint`'s metadata (checkpoints without them: start_batch = step).
int64_t resume_start_batch(const std::string& checkpoint, int64_t step, int64_t dataset_size,
                           const LoaderOptions& options);

}  // namespace detseg::dist

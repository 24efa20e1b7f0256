// Implements: the multi-threaded batch loader. Worker threads each build whole batches (load,
// decode, augment, collate) into a bounded reorder buffer; next() hands them out strictly in
// order, so a seed fixes the batches whatever the thread timing. Each example's augmentation draws
// from its own RNG seeded by (seed, epoch, dataset index).
//
// Order of one epoch: indices 0..n-1, kept when i % sample_1_of_n == 0 (eval subsampling), shuffled
// with (seed, epoch) when shuffle is on, then sharded: rank r takes positions r, r+W, ... (the
// shard is padded by wrapping around so every rank gets the same number, as torch's
// DistributedSampler), then cut into batches.
//
// An example the data set left out (bad_images: skip: load returns an Example without an image) is
// absent from its batch: in evaluation the batch is one smaller (an all-absent batch is not
// delivered); with replace_absent (training) the next present example of the epoch's shard order
// takes its place, so batches keep their size. Absence is a property of the file, so the batches
// stay the same whatever the thread timing, and the other examples keep their augmentation.
//
// Steps that mix images (mosaic, mixup, copy_paste) draw the other images' indices from the
// example's own stream, so they too depend on (seed, epoch, index) only; the batch number (the
// training step) tells mosaic when to stop. A resumed run (start_batch) thus sees the batches an
// uninterrupted one would: no augmentation state needs saving.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "detseg/data/example.h"
#include "detseg/data/transforms/augment.h"
#include "detseg/data/transforms/normalize.h"

namespace detseg {

struct CollateOptions {
  int64_t size_divisibility = 1;  // padded H and W are rounded up to a multiple of this (e.g. 128)
  // > 0: every batch is padded to exactly this height and width instead (an exported model's traced
  // input); a larger image is an error.
  int64_t fixed_height = 0, fixed_width = 0;
  NormalizeOptions normalize;
};

// Pads and stacks examples into a Batch (see example.h). The batch canvas is the largest image (or
// Example canvas) in the batch, rounded up to size_divisibility. Images must be uint8.
Batch collate(const std::vector<Example>& examples, const CollateOptions& options = {});

// The batch's images, boxes, classes, crowd flags, masks and label maps on `device`; the per-image
// sizes, scales, box counts, geometry and ids are host data and stay on the CPU. non_blocking
// copies from pinned memory return at once; the stream orders them before the kernels that read them.
Batch to_device(const Batch& batch, const at::Device& device, bool non_blocking = true);
// Those same tensors in page-locked host memory (needs a CUDA build with a visible GPU).
Batch pin_memory(const Batch& batch);

struct LoaderOptions {
  int64_t batch_size = 8;
  int num_workers = 2;          // 0: build batches on the calling thread
  int prefetch_batches = 4;     // bound on batches built ahead of next()
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t epochs = 1;           // 0: repeat forever
  bool drop_last = false;       // drop an epoch's final short batch
  int64_t sample_1_of_n = 1;    // keep every n-th example (eval on a subset)
  int rank = 0, world_size = 1; // sharding for distributed data parallel
  int64_t start_batch = 0;      // first batch number delivered: a resumed run continues the sequence
  AugmentOptions augment;
  CollateOptions collate;
  // Batches for a CUDA model: workers put each batch's tensors in page-locked memory, so the
  // copy to the GPU (to_device with non_blocking) overlaps the step instead of blocking it.
  bool pin_memory = false;
  // An absent example is replaced by the next present one in the epoch's shard order (training),
  // instead of leaving its batch one smaller (evaluation). See the top of this file.
  bool replace_absent = false;
};

class Loader {
 public:
  // `load(i)` returns the un-augmented example i (0..num_examples-1), or an Example without an
  // image when the data set leaves it out; it is called from several threads at once and must be
  // thread-safe (DetectionDataset::get is).
  using LoadFn = std::function<Example(int64_t index)>;
  Loader(int64_t num_examples, LoadFn load, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch; false once all epochs are done. Rethrows a worker's error (naming the file).
  bool next(Batch& batch);

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t examples_per_epoch() const { return examples_per_epoch_; }
  // Dataset indices of one epoch's batches, in delivery order (what next() will return).
  std::vector<std::vector<int64_t>> epoch_plan(int64_t epoch) const;
  // The augmented examples of batch `batch_number` before collate (uint8 images, boxes in their
  // pixels): what next() turns into that batch. Thread-safe; for pictures of what the model sees.
  std::vector<Example> examples(int64_t batch_number) const;

 private:
  using Plan = std::vector<std::vector<int64_t>>;
  std::shared_ptr<const Plan> plan(int64_t epoch) const;  // cached: no copy per batch
  Batch build(int64_t batch_number) const;
  std::vector<Example> augmented(int64_t batch_number, std::vector<int64_t>& positions) const;
  // An example picked with `rng` among the present ones, for the mixing steps.
  Example draw_example(Rng& rng) const;
  bool next_built(Batch& batch);  // the next built batch, empty ones included
  // load_(index), or an undefined image when absent (remembered: a left-out file is not read again).
  Example load_present(int64_t index) const;
  // The example that takes the place of absent shard position `position` of `epoch` (replace_absent).
  Example replacement(int64_t epoch, const Plan& plan, int64_t position, int64_t& index) const;
  void worker();

  int64_t num_examples_;
  LoadFn load_;
  LoaderOptions options_;
  std::vector<int64_t> base_;  // indices after sample_1_of_n
  int64_t examples_per_epoch_ = 0, batches_per_epoch_ = 0, total_batches_ = 0;  // total -1: forever

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> errors_;
  int64_t next_claim_ = 0, next_deliver_ = 0;
  mutable std::mutex plan_mutex_;
  mutable std::map<int64_t, std::shared_ptr<const Plan>> plans_;  // epoch -> batches (recent epochs)
  mutable std::mutex absent_mutex_;
  mutable std::unordered_set<int64_t> absent_;  // indices the data set left out
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace detseg

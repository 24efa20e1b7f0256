// Implements: collate (pad + stack) and the threaded, deterministic Loader.
#include "detseg/data/loader.h"

#include <ATen/Parallel.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <numeric>

#include "detseg/core/error.h"

namespace detseg {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) { return splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b); }

int64_t round_up(int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; }

}  // namespace

Batch collate(const std::vector<Example>& examples, const CollateOptions& options) {
  DETSEG_CHECK(!examples.empty(), "collate: empty batch");
  const int64_t b = static_cast<int64_t>(examples.size());
  int64_t H = 0, W = 0, M = 1;
  bool masks = examples[0].masks.defined(), labels = examples[0].label_map.defined();
  for (const Example& ex : examples) {
    DETSEG_CHECK(ex.image.defined() && ex.image.dim() == 3 && ex.image.size(0) == 3, "collate: image ", ex.image_id,
                 " is not [3, H, W]");
    DETSEG_CHECK(ex.masks.defined() == masks && ex.label_map.defined() == labels,
                 "collate: examples disagree on having masks / label maps (image ", ex.image_id, ")");
    H = std::max({H, ex.height(), ex.canvas_height});
    W = std::max({W, ex.width(), ex.canvas_width});
    M = std::max(M, ex.num_boxes());
  }
  H = round_up(H, options.size_divisibility);
  W = round_up(W, options.size_divisibility);
  if (options.fixed_height > 0 && options.fixed_width > 0) {
    DETSEG_CHECK(H <= options.fixed_height && W <= options.fixed_width, "collate: image ", examples[0].image_id,
                 " is ", H, "x", W, " after resizing, larger than the fixed ", options.fixed_height, "x",
                 options.fixed_width, " input (export with a larger --height/--width)");
    H = options.fixed_height;
    W = options.fixed_width;
  }

  Batch out;
  out.images = at::zeros({b, 3, H, W}, at::kFloat);     // 0 = the mean colour after normalising
  out.image_sizes = at::empty({b, 2}, at::kLong);
  out.original_sizes = at::empty({b, 2}, at::kLong);
  out.scales = at::empty({b}, at::kFloat);
  out.boxes = at::zeros({b, M, 4}, at::kFloat);
  out.classes = at::full({b, M}, -1, at::kLong);
  out.iscrowd = at::zeros({b, M}, at::kBool);
  out.num_boxes = at::empty({b}, at::kLong);
  if (masks) out.masks = at::zeros({b, M, H, W}, at::kByte);
  if (labels) out.label_maps = at::full({b, H, W}, 255, at::kLong);
  auto sizes = out.image_sizes.accessor<int64_t, 2>();
  auto originals = out.original_sizes.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const Example& ex = examples[static_cast<size_t>(i)];
    normalize_into(ex.image, out.images[i], options.normalize);
    sizes[i][0] = ex.height();
    sizes[i][1] = ex.width();
    originals[i][0] = ex.original_height;
    originals[i][1] = ex.original_width;
    out.scales[i] = ex.geometry.scale();
    out.geometries.push_back(ex.geometry);
    out.image_ids.push_back(ex.image_id);
    const int64_t n = ex.num_boxes();
    out.num_boxes[i] = n;
    if (n > 0) {
      out.boxes[i].narrow(0, 0, n).copy_(ex.boxes);
      out.classes[i].narrow(0, 0, n).copy_(ex.classes);
      if (ex.iscrowd.defined()) out.iscrowd[i].narrow(0, 0, n).copy_(ex.iscrowd);
      if (masks) out.masks[i].narrow(0, 0, n).narrow(1, 0, ex.height()).narrow(2, 0, ex.width()).copy_(ex.masks);
    }
    if (labels) out.label_maps[i].narrow(0, 0, ex.height()).narrow(1, 0, ex.width()).copy_(ex.label_map);
  }
  return out;
}

Loader::Loader(int64_t num_examples, LoadFn load, LoaderOptions options)
    : num_examples_(num_examples), load_(std::move(load)), options_(std::move(options)) {
  const LoaderOptions& o = options_;
  DETSEG_CHECK(num_examples_ > 0, "loader: empty dataset");
  DETSEG_CHECK(o.batch_size > 0, "loader: batch_size must be positive, got ", o.batch_size);
  DETSEG_CHECK(o.sample_1_of_n > 0, "loader: sample_1_of_n must be positive, got ", o.sample_1_of_n);
  DETSEG_CHECK(o.world_size > 0 && o.rank >= 0 && o.rank < o.world_size, "loader: rank ", o.rank,
               " invalid for world_size ", o.world_size);
  DETSEG_CHECK(o.epochs >= 0 && o.num_workers >= 0 && o.prefetch_batches > 0,
               "loader: epochs and num_workers must be >= 0 and prefetch_batches > 0");
  for (int64_t i = 0; i < num_examples_; i += o.sample_1_of_n) base_.push_back(i);
  const int64_t n = static_cast<int64_t>(base_.size());
  examples_per_epoch_ = o.world_size > 1 ? (n + o.world_size - 1) / o.world_size : n;
  batches_per_epoch_ = o.drop_last ? examples_per_epoch_ / o.batch_size
                                   : (examples_per_epoch_ + o.batch_size - 1) / o.batch_size;
  DETSEG_CHECK(batches_per_epoch_ > 0, "loader: ", examples_per_epoch_, " examples per epoch make no full batch of ",
               o.batch_size, " (drop_last)");
  total_batches_ = o.epochs == 0 ? -1 : o.epochs * batches_per_epoch_;
  DETSEG_CHECK(o.start_batch >= 0, "loader: start_batch must be >= 0");
  next_claim_ = next_deliver_ = o.start_batch;
  for (int i = 0; i < o.num_workers; ++i) threads_.emplace_back([this] { worker(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::vector<std::vector<int64_t>> Loader::epoch_plan(int64_t epoch) const { return *plan(epoch); }

std::shared_ptr<const Loader::Plan> Loader::plan(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(plan_mutex_);
  auto it = plans_.find(epoch);
  if (it != plans_.end()) return it->second;
  const LoaderOptions& o = options_;
  std::vector<int64_t> order = base_;
  if (o.shuffle) {
    // Same permutation on every rank: seeded by (seed, epoch) only.
    Rng rng(mix(o.seed, 0x5348554646ull, static_cast<uint64_t>(epoch)));
    std::shuffle(order.begin(), order.end(), rng);
  }
  std::vector<int64_t> shard;
  if (o.world_size > 1) {
    for (int64_t k = 0; k < examples_per_epoch_; ++k)
      shard.push_back(order[static_cast<size_t>((k * o.world_size + o.rank) % static_cast<int64_t>(order.size()))]);
  } else {
    shard = std::move(order);
  }
  auto batches = std::make_shared<Plan>();
  for (int64_t k = 0; k < batches_per_epoch_; ++k) {
    const int64_t start = k * o.batch_size, end = std::min<int64_t>(start + o.batch_size, examples_per_epoch_);
    batches->emplace_back(shard.begin() + start, shard.begin() + end);
  }
  if (plans_.size() > 4) plans_.erase(plans_.begin());  // only recent epochs are asked for
  plans_[epoch] = batches;
  return batches;
}

namespace {

// Applies `fn` to every defined per-pixel and per-box tensor of the batch. The per-image sizes,
// scales and box counts stay host tensors: models read them with item() to slice and clip, which
// on the GPU would be a host sync each.
template <class Fn>
Batch map_device_tensors(const Batch& batch, Fn fn) {
  Batch out = batch;
  for (at::Tensor* t : {&out.images, &out.boxes, &out.classes, &out.iscrowd, &out.masks, &out.label_maps})
    if (t->defined()) *t = fn(*t);
  return out;
}

}  // namespace

Batch to_device(const Batch& batch, const at::Device& device, bool non_blocking) {
  if (device.is_cpu() && batch.images.defined() && batch.images.device().is_cpu()) return batch;
  return map_device_tensors(batch, [&](const at::Tensor& t) { return t.to(device, non_blocking); });
}

Batch pin_memory(const Batch& batch) {
  return map_device_tensors(batch, [](const at::Tensor& t) { return t.pin_memory(); });
}

Example Loader::load_present(int64_t index) const {
  {
    std::lock_guard<std::mutex> lock(absent_mutex_);
    if (absent_.count(index)) return Example();
  }
  Example ex = load_(index);
  if (!ex.image.defined()) {
    std::lock_guard<std::mutex> lock(absent_mutex_);
    absent_.insert(index);
  }
  return ex;
}

Example Loader::replacement(int64_t epoch, const Plan& plan, int64_t position, int64_t& index) const {
  // Positions run through the plan's batches in order; all but the last batch are full.
  int64_t positions = 0;
  for (const auto& b : plan) positions += static_cast<int64_t>(b.size());
  for (int64_t step = 1; step < positions; ++step) {
    const int64_t q = (position + step) % positions;
    const int64_t candidate = plan[static_cast<size_t>(q / options_.batch_size)][static_cast<size_t>(q % options_.batch_size)];
    Example ex = load_present(candidate);
    if (ex.image.defined()) {
      index = candidate;
      return ex;
    }
  }
  throw Error(str("every image of epoch ", epoch, "'s data (", positions,
                  " images) was left out as unusable (bad_images: skip): nothing left to load"));
}

Example Loader::draw_example(Rng& rng) const {
  const int64_t start = std::uniform_int_distribution<int64_t>(0, num_examples_ - 1)(rng);
  for (int64_t k = 0; k < num_examples_; ++k) {
    Example ex = load_present((start + k) % num_examples_);
    if (ex.image.defined()) return ex;
  }
  throw Error("every image of the data set was left out as unusable (bad_images: skip): nothing to mix in");
}

std::vector<Example> Loader::examples(int64_t batch_number) const {
  std::vector<int64_t> positions;
  return augmented(batch_number, positions);
}

Batch Loader::build(int64_t batch_number) const {
  const int64_t epoch = batch_number / batches_per_epoch_;
  std::vector<int64_t> positions;
  std::vector<Example> examples = augmented(batch_number, positions);
  if (examples.empty()) {  // every image of this (evaluation) batch left out: next() skips it
    Batch none;
    none.epoch = epoch;
    return none;
  }
  Batch batch = collate(examples, options_.collate);
  batch.epoch = epoch;
  batch.positions = std::move(positions);
  return options_.pin_memory ? pin_memory(batch) : batch;
}

std::vector<Example> Loader::augmented(int64_t batch_number, std::vector<int64_t>& positions) const {
  const int64_t epoch = batch_number / batches_per_epoch_;
  const std::shared_ptr<const Plan> p = plan(epoch);
  const int64_t in_epoch = batch_number % batches_per_epoch_;
  const auto& indices = (*p)[static_cast<size_t>(in_epoch)];
  std::vector<Example> examples;
  examples.reserve(indices.size());
  AugmentContext context;
  context.step = batch_number;
  context.draw_example = [this](Rng& rng) { return draw_example(rng); };
  for (size_t j = 0; j < indices.size(); ++j) {
    const int64_t index = indices[j];
    const int64_t position = in_epoch * options_.batch_size + static_cast<int64_t>(j);
    Example ex = load_present(index);
    // Each example's augmentation is seeded by (seed, epoch, index), so leaving one out changes no
    // other. A replacement draws from a stream of its own (seeded by the absent index), not the
    // one its own place in the epoch uses.
    uint64_t seed = mix(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
    if (!ex.image.defined()) {
      if (!options_.replace_absent) continue;
      int64_t used = -1;
      ex = replacement(epoch, *p, position, used);
      seed = mix(options_.seed ^ 0x5245504C41434544ull, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
    }
    Rng rng(seed);
    augment(ex, options_.augment, rng, context);
    examples.push_back(std::move(ex));
    positions.push_back(position);
  }
  return examples;
}

void Loader::worker() {
  // ATen runs every thread's kernels at the process's intra-op thread count, so each worker would
  // start an OpenMP team of its own: with 2 workers and the training step's team, 6 threads on 2
  // cores, waking and sleeping thousands of times a step. The workers are the data parallelism:
  // their kernels run on their own thread. libtorch sets a thread's count at its first kernel
  // there (by a flag of its own), so that comes first.
  (void)at::get_num_threads();
#ifdef _OPENMP
  omp_set_num_threads(1);
#endif
  for (;;) {
    int64_t k;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] {
        return stop_ || (next_claim_ < next_deliver_ + options_.prefetch_batches &&
                         (total_batches_ < 0 || next_claim_ < total_batches_));
      });
      if (stop_) return;
      k = next_claim_++;
    }
    Batch batch;
    std::exception_ptr error;
    try {
      batch = build(k);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) errors_[k] = error;
      else ready_[k] = std::move(batch);
    }
    cv_.notify_all();
  }
}

bool Loader::next(Batch& batch) {
  for (;;) {
    if (!next_built(batch)) return false;
    if (batch.size() > 0) return true;  // (empty: every image of it was left out)
  }
}

bool Loader::next_built(Batch& batch) {
  if (total_batches_ >= 0 && next_deliver_ >= total_batches_) return false;
  if (threads_.empty()) {
    batch = build(next_deliver_++);
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return ready_.count(next_deliver_) || errors_.count(next_deliver_); });
  auto err = errors_.find(next_deliver_);
  if (err != errors_.end()) {
    std::exception_ptr e = err->second;
    errors_.erase(err);
    ++next_deliver_;
    lock.unlock();
    cv_.notify_all();
    std::rethrow_exception(e);
  }
  batch = std::move(ready_[next_deliver_]);
  ready_.erase(next_deliver_);
  ++next_deliver_;
  lock.unlock();
  cv_.notify_all();
  return true;
}

}  // namespace detseg

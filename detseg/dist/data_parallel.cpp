#include "detseg/dist/data_parallel.h"

#include <torch/nn/module.h>

#include <nlohmann/json.hpp>

#include <chrono>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/models/layers/frozen_batch_norm.h"
#include "detseg/train/checkpoint.h"

namespace detseg::dist {

GradientAverager::GradientAverager(ProcessGroup& group, std::vector<at::Tensor> params, double bucket_mb, bool overlap)
    : group_(group), params_(std::move(params)), where_(params_.size()), seen_(params_.size(), 0), overlap_(overlap) {
  const auto cap = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  Bucket current;
  int64_t bytes = 0;
  auto close = [&] {
    if (current.params.empty()) return;
    int64_t numel = 0;
    for (size_t p : current.params) {
      current.offsets.push_back(numel);
      numel += params_[p].numel();
    }
    current.flat = at::zeros({numel}, params_[current.params[0]].options());
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    // One dtype per flat bucket.
    if (!current.params.empty() && params_[current.params[0]].scalar_type() != p.scalar_type()) close();
    where_[k] = {buckets_.size(), current.params.size()};
    current.params.push_back(k);
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    if (bytes >= cap) close();
  }
  close();
  for (size_t k = 0; k < params_.size(); ++k) {
    unsigned handle = params_[k].register_hook([this, k](const at::Tensor& grad) { on_gradient(k, grad); });
    hooks_.push_back({k, handle});
  }
}

GradientAverager::~GradientAverager() {
  for (auto& [k, handle] : hooks_) params_[k].remove_hook(handle);
}

void GradientAverager::on_gradient(size_t param, const at::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seen_[param]) return;  // a second gradient for a leaf (not produced by the autograd engine)
  seen_[param] = 1;
  auto [b, slot] = where_[param];
  Bucket& bucket = buckets_[b];
  bucket.flat.narrow(0, bucket.offsets[slot], grad.numel()).copy_(grad.reshape({-1}));
  if (++bucket.filled == bucket.params.size() && overlap_) launch_ready();
}

void GradientAverager::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].filled == buckets_[next_launch_].params.size()) {
    if (next_launch_ == 0) first_launch_ = std::chrono::steady_clock::now();
    Bucket& bucket = buckets_[next_launch_++];
    bucket.launched = true;
    bucket.pending = group_.all_reduce_sum_async(bucket.flat);
  }
}

void GradientAverager::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Parameters the hooks did not see this step (unused, or frozen by the graph) count as zeros.
    for (size_t k = 0; k < params_.size(); ++k) {
      if (seen_[k]) continue;
      auto [b, slot] = where_[k];
      Bucket& bucket = buckets_[b];
      at::Tensor dst = bucket.flat.narrow(0, bucket.offsets[slot], params_[k].numel());
      const at::Tensor& g = params_[k].grad();
      if (g.defined()) dst.copy_(g.reshape({-1})); else dst.zero_();
      seen_[k] = 1;
      ++bucket.filled;
    }
    launch_ready();
  }
  const auto start = std::chrono::steady_clock::now();
  const double inverse = 1.0 / group_.world_size();
  for (Bucket& bucket : buckets_) {
    bucket.pending.wait();
    bucket.flat.mul_(inverse);
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      at::Tensor& p = params_[bucket.params[slot]];
      at::Tensor avg = bucket.flat.narrow(0, bucket.offsets[slot], p.numel()).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(avg); else p.mutable_grad() = avg.clone();
    }
    bucket.filled = 0;
    bucket.launched = false;
  }
  const auto end = std::chrono::steady_clock::now();
  last_wait_seconds_ = std::chrono::duration<double>(end - start).count();
  last_span_seconds_ = std::chrono::duration<double>(end - first_launch_).count();
  std::fill(seen_.begin(), seen_.end(), 0);
  next_launch_ = 0;
}

DataParallel::DataParallel(const DistributedConfig& config, const at::Device& device)
    : config_(config), env_(environment_from_env()) {
  const bool nccl = use_nccl(config.backend, device);  // checked in one process too: a wrong choice fails early
  if (env_.world_size <= 1) return;
  // Only rank 0 talks to the user; the others report warnings and errors.
  if (!is_main()) set_log_level(LogLevel::kWarn);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  group_ = std::make_shared<ProcessGroup>(env_, timeout, nccl);
  log_info("data-parallel: ", env_.world_size, " processes, ", group_->backend(), " backend, rendezvous at ",
           env_.master_addr, ":", env_.master_port);
}

DataParallel::~DataParallel() = default;

int64_t DataParallel::agree_on_step(int64_t step) {
  if (!group_) return step;
  std::vector<at::Tensor> main_step{at::tensor({step}, at::kLong)};
  group_->broadcast(main_step, 0);
  const int64_t expected = main_step[0].item<int64_t>();
  DETSEG_CHECK(expected == step, "distributed: rank ", env_.rank, " resumed from step ", step, " but rank 0 from step ",
               expected, ": every rank must see the same --model-dir (a shared folder) to resume");
  return step;
}

void DataParallel::broadcast_module(torch::nn::Module& module) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors;
  for (auto& p : module.parameters()) tensors.push_back(p);
  for (auto& b : module.buffers()) tensors.push_back(b);
  // Gloo broadcasts contiguous tensors in place: channels-last conv weights (ops/fast_paths.h) go
  // through contiguous copies.
  std::vector<at::Tensor> sent;
  for (auto& t : tensors) sent.push_back(t.is_contiguous() ? t : t.contiguous());
  group_->broadcast(sent, 0);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!sent[i].is_same(tensors[i])) tensors[i].copy_(sent[i]);
}

int DataParallel::synchronise_batch_norm(torch::nn::Module& module) {
  if (!group_ || !config_.sync_batch_norm) return 0;
  int layers = 0;
  ProcessGroup* group = group_.get();
  for (const auto& m : module.modules()) {
    auto* norm = dynamic_cast<Norm2dImpl*>(m.get());
    if (norm == nullptr || norm->options.frozen()) continue;
    norm->replica_sum = [group](at::Tensor& t) { group->all_reduce_sum(t); };
    ++layers;
  }
  sync_batch_norm_ = layers > 0;
  log_info("data-parallel: ", layers, " batch-norm layers synchronised across ", env_.world_size, " ranks",
           layers ? "" : " (none is trainable: model.frozen_batch_norm)");
  return layers;
}

void DataParallel::attach(const std::vector<at::Tensor>& params) {
  if (!group_) return;
  averager_ = std::make_unique<GradientAverager>(*group_, params, config_.bucket_mb, /*overlap=*/!sync_batch_norm_);
  log_debug("data-parallel: ", params.size(), " gradients in ", averager_->num_buckets(), " buckets");
}

DataParallel::StepVote DataParallel::vote(int64_t failed_step, bool stop_requested) {
  if (!group_) return StepVote{failed_step >= 0 ? 0 : -1, failed_step, stop_requested};
  // Each rank writes its failed step + 1 (0: none) in its own slot; the sum leaves every slot as written.
  at::Tensor flags = at::zeros({env_.world_size + 1}, at::kDouble);
  flags[env_.rank] = static_cast<double>(failed_step + 1);
  flags[env_.world_size] = stop_requested ? 1.0 : 0.0;
  group_->all_reduce_sum(flags);
  StepVote vote;
  const double* f = flags.data_ptr<double>();
  for (int r = 0; r < env_.world_size && vote.failed_rank < 0; ++r)
    if (f[r] > 0) {
      vote.failed_rank = r;
      vote.failed_step = static_cast<int64_t>(f[r]) - 1;
    }
  vote.stop = f[env_.world_size] > 0;
  return vote;
}

void DataParallel::average_across_ranks(std::vector<std::pair<std::string, double>>& values) {
  if (!group_ || values.empty()) return;
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kDouble);
  for (size_t i = 0; i < values.size(); ++i) t[static_cast<int64_t>(i)] = values[i].second;
  group_->all_reduce_sum(t);
  for (size_t i = 0; i < values.size(); ++i) values[i].second = t[static_cast<int64_t>(i)].item<double>() / env_.world_size;
}

std::vector<std::pair<std::string, double>> DataParallel::step_timings() const {
  if (!averager_) return {};
  return {{"allreduce_wait_s", averager_->last_wait_seconds()}, {"allreduce_span_s", averager_->last_span_seconds()}};
}

std::string DataParallel::checkpoint_metadata(const std::string& metadata_json, int64_t batch_size) const {
  nlohmann::json meta = nlohmann::json::parse(metadata_json);
  meta["world_size"] = env_.world_size;
  meta["batch_size"] = batch_size;
  return meta.dump();
}

void DataParallel::average_gradients() {
  if (averager_) averager_->finish();
}

int64_t resume_start_batch(int64_t step, int64_t saved_world_size, int64_t saved_batch_size, int64_t num_examples,
                           int64_t world_size, int64_t batch_size, bool drop_last) {
  // Mirrors Loader: per-rank examples ceil(n / W), batches rounded up (or down with drop_last).
  auto batches_per_epoch = [&](int64_t w, int64_t b) {
    const int64_t per_rank = (num_examples + w - 1) / w;
    return std::max<int64_t>(1, drop_last ? per_rank / b : (per_rank + b - 1) / b);
  };
  const int64_t old_bpe = batches_per_epoch(saved_world_size, saved_batch_size);
  const int64_t new_bpe = batches_per_epoch(world_size, batch_size);
  const int64_t epoch = step / old_bpe;
  const int64_t consumed = (step % old_bpe) * saved_batch_size * saved_world_size;  // epoch positions used
  const int64_t global_batch = batch_size * world_size;
  return epoch * new_bpe + std::min(new_bpe, (consumed + global_batch - 1) / global_batch);
}

int64_t resume_start_batch(const std::string& checkpoint, int64_t step, int64_t dataset_size,
                           const LoaderOptions& options) {
  const nlohmann::json meta = nlohmann::json::parse(read_checkpoint_metadata(checkpoint), nullptr, false);
  if (!meta.is_object() || !meta.contains("world_size") || !meta.contains("batch_size")) return step;
  const int64_t saved_world = meta["world_size"].get<int64_t>(), saved_batch = meta["batch_size"].get<int64_t>();
  const int64_t n = (dataset_size + options.sample_1_of_n - 1) / options.sample_1_of_n;
  const int64_t start = resume_start_batch(step, saved_world, saved_batch, n, options.world_size, options.batch_size,
                                           options.drop_last);
  if (saved_world != options.world_size || saved_batch != options.batch_size)
    log_info("resuming a run saved with ", saved_world, " x batch ", saved_batch, " on ", options.world_size,
             " x batch ", options.batch_size, ": step ", step, " continues at loader batch ", start);
  return start;
}

}  // namespace detseg::dist

#include "detseg/engine/train_loop.h"

#include <nlohmann/json.hpp>
#include <torch/optim.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/openmp_wait.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/dist/data_parallel.h"
#include "detseg/engine/augment_preview.h"
#include "detseg/engine/check_data.h"
#include "detseg/engine/device.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/inputs.h"
#include "detseg/engine/memory.h"
#include "detseg/engine/step_health.h"
#include "detseg/engine/step_profiler.h"
#include "detseg/hub/weights_cache.h"
#include "detseg/io/metrics_jsonl.h"
#include "detseg/io/tfevents.h"
#include "detseg/models/build.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/ema.h"
#include "detseg/train/fine_tune.h"
#include "detseg/train/loss_scaler.h"
#include "detseg/train/optimizer.h"
#include "detseg/train/schedules.h"

namespace detseg {
namespace {

// The config holds ScheduleOptions itself; the batch and length come from train.*.
ScheduleOptions schedule_options(const TrainConfig& t, int64_t world_size) {
  ScheduleOptions o = t.schedule;
  o.global_batch = t.batch_size * world_size;
  o.total_steps = t.num_steps;
  return o;
}

// A fault-injection hook for tests of the non-finite-loss stop: DETSEG_INJECT_NAN_LOSS=STEP or
// STEP:RANK makes the loss of step STEP (numbered from 1, as in metrics.jsonl) NaN, on that rank or
// on every rank.
bool injected_nan_loss(int64_t step, int rank) {
  const char* v = std::getenv("DETSEG_INJECT_NAN_LOSS");
  if (v == nullptr || *v == '\0') return false;
  long long at_step = -1;
  int at_rank = -1;
  if (std::sscanf(v, "%lld:%d", &at_step, &at_rank) < 1)
    throw ConfigError(str("DETSEG_INJECT_NAN_LOSS='", v, "' is not STEP or STEP:RANK"));
  return step == at_step && (at_rank < 0 || rank == at_rank);
}

// The CPU reads every step's losses (it costs nothing there); DETSEG_LAZY_HOST_READS=1 makes it
// read only where a GPU run does, so tests on the CPU cover that path.
bool reads_every_step(const at::Device& device) {
  const char* lazy = std::getenv("DETSEG_LAZY_HOST_READS");
  return device.is_cpu() && !(lazy != nullptr && std::string(lazy) == "1");
}

// ---- The steps of train_model, in the order it runs them.

// One trainer per model dir: a second one would interleave checkpoints and logs. Rank 0 (or the
// only process) holds the lock; the other ranks of its run share the dir by design. `created` says
// whether this run made the folder, so that a run refused by its checks can take it away again.
struct ModelDirClaim {
  std::unique_ptr<DirectoryLock> lock;
  bool created = false;
};

ModelDirClaim claim_model_dir(const std::string& model_dir) {
  ModelDirClaim claim;
  std::error_code ec;
  claim.created = !std::filesystem::exists(model_dir, ec);
  make_directories(model_dir);
  if (const char* rank = std::getenv("RANK"); rank != nullptr && std::string(rank) != "0") return claim;
  claim.lock = std::make_unique<DirectoryLock>(model_dir, "another detseg train");
  return claim;
}

// A run refused before its first step leaves the model dir as it found it: a folder it created
// holds only the lock file then, and goes.
void release_refused_model_dir(ModelDirClaim& claim, const std::string& model_dir) {
  if (!claim.created || !claim.lock) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec))
    if (entry.path().filename() != ".lock") return;
  claim.lock.reset();
  std::filesystem::remove(std::filesystem::path(model_dir) / ".lock", ec);
  std::filesystem::remove(model_dir, ec);
}

// train.log is opened once the run is accepted (appended run after run).
void start_model_dir_log(const PipelineConfig& config, const std::string& model_dir) {
  log_to_file(model_dir + "/train.log");
  append_to_log_file(str("detseg train: ", config.source, " -> ", model_dir));
  // Every step's time depends on it (detseg/core/openmp_wait.h): a benchmark's log says which.
  append_to_log_file(str("openmp waiting ", openmp_wait_in_effect()));
  if (int removed = remove_stale_temp_files(model_dir))
    log_debug("removed ", removed, " temporary files left by a killed run in ", model_dir);
}

// What the loop trains and updates: the model with its optimizer, schedule, EMA and fp16 scaler.
struct Trainee {
  std::shared_ptr<ModelImpl> model;
  OptimizerOptions opt_options;
  ParameterSelection params;
  Schedule schedule;
  TrainOptimizer optimizer;
  std::unique_ptr<WeightEma> ema;
  std::unique_ptr<LossScaler> scaler;

  // EMA restarts from the weights as they are now (after fine-tuning or a broadcast).
  void restart_ema(const TrainConfig& t) {
    if (ema) ema = std::make_unique<WeightEma>(*model, EmaOptions{t.moving_average_decay, true});
  }
};

Trainee build_trainee(const PipelineConfig& config, const at::Device& device, int64_t world_size) {
  const TrainConfig& t = config.train;
  Trainee r;
  r.model = build_model(config);
  r.model->to(device);
  to_fast_weight_layout(r.model->parameters());  // before the optimizer and EMA copy them
  r.model->train();
  if (t.mixed_precision == "fp16") r.scaler = std::make_unique<LossScaler>(device);
  if (t.mixed_precision == "fp16" && device.is_cpu())
    log_warn("train.mixed_precision fp16 on the CPU is slow (LibTorch has no fast fp16 CPU convolutions); bf16 is the CPU's");
  r.opt_options = t.optimizer;
  for (const auto& m : model_gradient_multipliers(config)) r.opt_options.multipliers.push_back(m);
  r.params = select_parameters(*r.model, r.opt_options);
  r.schedule = resolve_schedule(schedule_options(t, world_size));
  r.optimizer = build_optimizer(r.params, r.opt_options, learning_rate_at(r.schedule, 0));
  if (t.moving_average_decay > 0) r.ema = std::make_unique<WeightEma>(*r.model, EmaOptions{t.moving_average_decay, true});
  return r;
}

// "ours=theirs" entries of train.fine_tune.class_map.
std::map<std::string, std::string> class_renames(const FineTuneOptions& ft) {
  std::map<std::string, std::string> out;
  for (const std::string& entry : ft.class_map) {
    const size_t eq = entry.find('=');
    DETSEG_CONFIG_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(), "train.fine_tune.class_map: '",
                        entry, "' is not ours=theirs");
    DETSEG_CONFIG_CHECK(out.emplace(entry.substr(0, eq), entry.substr(eq + 1)).second,
                        "train.fine_tune.class_map: class '", entry.substr(0, eq), "' is renamed twice");
  }
  return out;
}

// Whether the fine-tune loads the layers whose rows stand for classes (the heads' last layers).
bool fine_tune_loads_class_layers(const FineTuneOptions& ft) {
  return parse_fine_tune_type(ft.type) == FineTuneType::kDetection && ft.load_all_detection_vars &&
         ft.classes != "drop";
}

// The classes the model stands for, in label order, before the training data is read (the data is
// then matched to them by name): a resumed checkpoint's; else, when a fine-tune loads the class
// layers of a checkpoint that names its classes, that checkpoint's (train.fine_tune.classes:
// match), renamed by class_map; else none: the training data's own order.
std::vector<std::string> model_class_order(const PipelineConfig& config, const std::string& model_dir,
                                           const CheckpointManager& checkpoints) {
  if (auto latest = checkpoints.latest()) return checkpoint_class_names(*latest);
  const FineTuneOptions& ft = config.train.fine_tune;
  if (!should_fine_tune(ft, model_dir) || !fine_tune_loads_class_layers(ft) || !is_checkpoint_file(ft.checkpoint))
    return {};
  std::vector<std::string> order = checkpoint_class_names(ft.checkpoint);
  std::map<std::string, std::string> theirs_to_ours;
  for (const auto& [ours, theirs] : class_renames(ft)) theirs_to_ours[theirs] = ours;
  for (std::string& name : order)
    if (auto it = theirs_to_ours.find(name); it != theirs_to_ours.end()) name = it->second;
  return order;
}

// train.fine_tune.classes drop: the tensors whose shape follows model.num_classes (found by building
// the model once more with one class more) are not loaded from the checkpoint.
std::string class_layers_pattern(const PipelineConfig& config, ModelImpl& model) {
  PipelineConfig more = config;
  more.model.num_classes += 1;
  std::map<std::string, std::vector<int64_t>> other;
  for (const auto& item : build_model(more)->named_parameters(/*recurse=*/true))
    other[item.key()] = item.value().sizes().vec();
  std::string pattern;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    auto it = other.find(item.key());
    if (it == other.end() || it->second == item.value().sizes().vec()) continue;
    std::string escaped;
    for (char c : item.key()) escaped += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? std::string(1, c)
                                                                                                  : std::string("\\") + c;
    pattern += (pattern.empty() ? "^(" : "|") + escaped;
  }
  return pattern.empty() ? pattern : pattern + ")$";
}

// The starting weights: the model dir's latest checkpoint (resume: returns its step and sets
// `resumed_from`), else train.fine_tune.checkpoint, else model.pretrained, else as built.
int64_t initialise_weights(const PipelineConfig& config, const std::string& model_dir, Trainee& trainee,
                           CheckpointManager& checkpoints, std::string& resumed_from) {
  const TrainConfig& t = config.train;
  if (auto latest = checkpoints.latest()) {
    NamedTensors loop_state;
    const int64_t step =
        restore_training_state(*latest, *trainee.model, trainee.optimizer.optimizer.get(), trainee.ema.get(), &loop_state);
    if (trainee.scaler) trainee.scaler->load(loop_state);
    resumed_from = *latest;
    log_info("resumed from ", *latest, " at step ", step);
    return step;
  }
  FineTuneOptions ft = t.fine_tune;
  std::string extra = model_fine_tune_exclude(config);
  if (ft.classes == "drop") {
    const std::string classes = class_layers_pattern(config, *trainee.model);
    extra = extra.empty() ? classes : classes.empty() ? extra : "(" + extra + ")|" + classes;
  }
  if (!extra.empty())
    ft.exclude_pattern = ft.exclude_pattern.empty() ? extra : "(" + ft.exclude_pattern + ")|" + extra;
  if (should_fine_tune(ft, model_dir)) {
    FineTuneSummary summary = fine_tune_from_checkpoint(*trainee.model, ft);
    log_info("fine-tune from ", ft.checkpoint, ":\n", summary.to_string());
    if (!config.model.pretrained.empty())
      log_info("model.pretrained not used: train.fine_tune.checkpoint initialises the model");
    trainee.restart_ema(t);
  } else if (!config.model.pretrained.empty()) {
    // Every rank fetches: the weights cache lets one process download while the others wait
    // on its lock (no collective that could time out), then they all read the same file.
    const std::string file = fetch_weights(config.model.pretrained, config.model.pretrained_sha256,
                                           "model.pretrained", "model.pretrained_sha256");
    FineTuneSummary summary = fine_tune_from_checkpoint(*trainee.model, pretrained_fine_tune_options(config, file));
    log_info("pretrained backbone from ", file, ":\n", summary.to_string());
    trainee.restart_ema(t);
  }
  return 0;
}

Loader make_train_loader(const PipelineConfig& config, const InputData& data, const ModelImpl& model,
                         const dist::DataParallel& dp, const at::Device& device, int64_t step,
                         const std::string& resumed_from) {
  LoaderOptions o = make_loader_options(config, config.train_input, /*training=*/true, config.train.batch_size,
                                        model.input_size());
  o.start_batch = step;  // resume exactly where the batches left off
  o.rank = dp.rank();
  o.world_size = dp.world_size();
  o.pin_memory = device.is_cuda();
  if (!resumed_from.empty()) o.start_batch = dist::resume_start_batch(resumed_from, step, data.size, o);
  return Loader(data.size, data.load, o);
}

// eval.every_steps: evaluates the current weights (the EMA averages when EMA is on, as `detseg
// eval` of that step's checkpoint would) on every evaluation set into model_dir/eval/, sharded over
// the ranks. The RNG state is put back so the evaluation does not change the training that follows.
// The last step's evaluation is per class, as the final one, and is returned for `detseg train` to
// report. Empty when periodic evaluation is off.
std::function<std::vector<EvalReport>(int64_t)> periodic_evaluation(const PipelineConfig& config,
                                                                    const std::string& model_dir, Trainee& trainee,
                                                                    dist::DataParallel& dp) {
  if (config.eval.every_steps <= 0 || evaluation_sets(config).empty()) return {};
  std::shared_ptr<EvalRecorder> recorder;
  if (dp.is_main()) recorder = std::make_shared<EvalRecorder>(model_dir + "/eval");
  return [&config, &trainee, &dp, recorder](int64_t at_step) {
    const NamedTensors rng = rng_states();
    std::vector<EvalReport> evaluations;
    {
      EmaScope averages(trainee.ema.get(), *trainee.model);
      const bool last = at_step == config.train.num_steps;
      evaluations = evaluate_model_on_sets(config, *trainee.model, at_step, dp.group(), /*per_class=*/last);
    }
    trainee.model->train();
    restore_rng_states(rng);
    if (!recorder) return evaluations;
    std::string headline;
    for (const EvalReport& evaluation : evaluations) {
      recorder->write(evaluation);
      const std::string prefix = evaluation.set_name.empty() ? "" : evaluation.set_name + "/";
      for (size_t i = 0; i < evaluation.scalars.size() && i < 2; ++i)
        headline += str(" ", prefix, evaluation.scalars[i].first, " ", evaluation.scalars[i].second);
    }
    log_info("evaluation at step ", at_step, ":", headline);
    return evaluations;
  };
}

// What one optimisation step leaves on the device for the rest of the loop (nothing is read back).
struct StepOutcome {
  ModelLosses losses;
  at::Tensor total;      // loss + L2
  at::Tensor l2;
  at::Tensor grad_norm;  // before clipping
  at::Tensor skipped;    // 0-dim float: 1 when the update was skipped (gradients not finite)
  double lr = 0;
};

// Forward (autocast), backward, gradient all-reduce, unscale and clip, then the update, which the
// device itself skips when the gradients are not finite (fp16 overflow, or a NaN loss on any rank:
// the backward of a non-finite loss is seeded with NaN so that every rank's all-reduced gradients,
// and so every rank's skip, agree). No host sync: StepHealth tells the host later.
StepOutcome optimisation_step(Trainee& trainee, const Batch& batch, int64_t step, const TrainConfig& t,
                              dist::DataParallel& dp) {
  StepOutcome out;
  out.lr = learning_rate_at(trainee.schedule, step);
  trainee.optimizer.set_learning_rate(out.lr);
  {
    DETSEG_PROFILE_SCOPE("detseg::zero_grad");
    trainee.optimizer.optimizer->zero_grad();
  }
  trainee.model->set_step(step);
  {
    DETSEG_PROFILE_SCOPE("detseg::forward_and_losses");
    AutocastScope autocast(batch.images.device(), t.mixed_precision);
    out.losses = trainee.model->losses(batch);
  }
  {
    DETSEG_PROFILE_SCOPE("detseg::l2");
    out.l2 = l2_regularization_loss(trainee.params, trainee.opt_options.l2_weight);
    out.total = out.losses.total + out.l2;
  }
  if (injected_nan_loss(step + 1, dp.rank())) out.total = out.total * std::nan("");
  LossScaler* scaler = trainee.scaler.get();
  const std::vector<at::Tensor> params = trainee.params.tensors();
  {
    DETSEG_PROFILE_SCOPE("detseg::backward");
    const at::Tensor seed = at::where(out.total.detach().isfinite(), 1.0, std::nan("")).to(out.total.dtype());
    (scaler ? scaler->scale(out.total) : out.total).backward(seed);
  }
  {
    DETSEG_PROFILE_SCOPE("detseg::all_reduce");
    dp.average_gradients();
  }
  DETSEG_PROFILE_SCOPE("detseg::clip_and_update");
  const at::Tensor found_inf = scaler ? scaler->unscale_gradients(params) : at::Tensor();
  out.grad_norm = clip_gradients_by_global_norm_async(params, trainee.opt_options.clip_gradients_norm);
  out.skipped = out.grad_norm.isfinite().logical_not().to(at::kFloat);
  trainee.optimizer.step(out.skipped);
  if (scaler) scaler->update(found_inf);
  return out;
}

// Reads StepHealth (one host sync) and agrees with the other ranks: a failed step on any rank
// stops every rank here, naming the step and the last good checkpoint. The failed update itself
// was skipped on the device, so the weights and the checkpoints stay good. Returns what was read
// and whether any rank was asked to stop.
std::pair<StepHealth::Reading, bool> check_health(StepHealth& health, dist::DataParallel& dp,
                                                  const CheckpointManager& checkpoints, LossScaler* scaler) {
  const StepHealth::Reading r = health.read();
  if (scaler && r.skipped_steps > 0)
    log_debug("fp16: ", r.skipped_steps, " steps skipped for overflow since the last check; loss scale now ",
              scaler->current_scale());
  // A rank reports its own failure only when its loss went bad; a failure of the (all-reduced)
  // gradients alone is every rank's, and each reports it below.
  const bool own_loss = r.failed_step >= 0 && !r.failure.loss_finite();
  const dist::DataParallel::StepVote vote = dp.vote(own_loss ? r.failed_step : -1, stop_signal() != 0);
  const std::string last_good = checkpoints.latest().value_or("(none)");
  const std::string hint = ". HINT: lower train.schedule.learning_rate or enable train.clip_gradients_norm";
  if (vote.failed_rank == dp.rank())
    throw Error(str("loss is ", r.failure.total, " at step ", r.failed_step, " (", r.failure.parts_text(),
                    " ); training stopped. The last good checkpoint is ", last_good, hint));
  if (vote.failed_rank >= 0)
    throw Error(str("the loss of rank ", vote.failed_rank, " is not finite at step ", vote.failed_step,
                    "; training stopped on every rank. The last good checkpoint is ", last_good, " (rank ",
                    vote.failed_rank, "'s log has the details)"));
  if (r.failed_step >= 0)
    throw Error(str("gradient norm is ", r.failure.grad_norm, " at step ", r.failed_step, " (", r.failure.parts_text(),
                    " )", scaler ? " after more than 50 fp16 overflows in a row" : "",
                    "; training stopped. The last good checkpoint is ", last_good, hint));
  return {r, vote.stop};
}

// A logged step's record: the losses averaged over ranks (every rank takes part in the all-reduce),
// the learning rate, the gradient norm, the speed since the last record and the all-reduce timings.
MetricsRecord step_record(const StepHealth::Values& v, double lr, int64_t step, double steps_per_s,
                          dist::DataParallel& dp) {
  std::vector<std::pair<std::string, double>> loss_values = {{"total_loss", v.total}};
  for (const auto& part : v.parts) loss_values.push_back(part);
  loss_values.push_back({"l2_loss", v.l2});
  dp.average_across_ranks(loss_values);
  MetricsRecord record;
  record.step = step;
  record.time = unix_time_now();
  record.split = "train";
  record.values = loss_values;
  record.values.push_back({"learning_rate", lr});
  record.values.push_back({"grad_norm", v.grad_norm});
  record.values.push_back({"steps_per_s", steps_per_s});
  for (auto& timing : dp.step_timings()) record.values.push_back(timing);
  return record;
}

}  // namespace

TrainResult train_model(const PipelineConfig& config, const std::string& model_dir) {
  const TrainConfig& t = config.train;
  const at::Device device = resolve_device(config.device);  // before anything slow: a wrong --device fails at once
  // Also before the model dir is touched: a model too large for this machine is refused with its
  // size, and a block larger than the memory left fails naming it (engine/memory.h).
  check_model_fits_in_memory(config, ModelUse::kTraining);
  guard_cpu_allocations();
  ModelDirClaim claim = claim_model_dir(model_dir);
  CheckpointManagerOptions ckpt_options;
  ckpt_options.model_dir = model_dir;
  ckpt_options.keep = static_cast<int>(t.keep_checkpoints);
  ckpt_options.save_every_steps = t.checkpoint_every;
  std::optional<dist::DataParallel> dp_slot;
  std::optional<CheckpointManager> checkpoints_slot;
  InputData data;
  try {
    dp_slot.emplace(t.distributed, device);  // one process unless torchrun's variables say otherwise
    at::manual_seed(static_cast<uint64_t>(t.seed));
    checkpoints_slot.emplace(ckpt_options);
    const std::vector<std::string> class_order = model_class_order(config, model_dir, *checkpoints_slot);
    data = make_input_data(config, config.train_input, /*training=*/true, class_order);
    DETSEG_CONFIG_CHECK(data.num_classes == config.model.num_classes, location(config.source), "model.num_classes is ",
                        config.model.num_classes, " but ", config.train_input.annotations, " defines ",
                        data.num_classes, " classes",
                        class_order.empty() ? "" : str(" (by name, the model's ", quoted_names(class_order), ")"));
    check_evaluation_sets(config, data.class_names);
    check_evaluation_data(config, dp_slot->is_main());  // a bad evaluation image stops the run now, not at its first evaluation
  } catch (...) {
    release_refused_model_dir(claim, model_dir);
    throw;
  }
  if (claim.lock) start_model_dir_log(config, model_dir);
  dist::DataParallel& dp = *dp_slot;
  CheckpointManager& checkpoints = *checkpoints_slot;
  Trainee trainee = build_trainee(config, device, dp.world_size());
  trainee.model->class_names = data.class_names;
  std::string resumed_from;
  int64_t step = initialise_weights(config, model_dir, trainee, checkpoints, resumed_from);
  step = dp.agree_on_step(step);
  dp.broadcast_module(*trainee.model);
  if (resumed_from.empty()) trainee.restart_ema(t);

  // Class names travel with the weights so `detseg predict` needs no annotation file.
  const std::string metadata = nlohmann::json{{"model", config.model.type}, {"detseg", DETSEG_VERSION},
                                              {"class_names", data.class_names}, {"category_ids", data.category_ids}}
                                   .dump();
  auto save = [&](int64_t at_step) {
    trainee.optimizer.sync_state();
    Checkpoint state = capture_training_state(at_step, *trainee.model, trainee.optimizer.optimizer.get(),
                                              trainee.ema.get(), dp.checkpoint_metadata(metadata, t.batch_size));
    if (trainee.scaler) state.loop = trainee.scaler->state();
    return checkpoints.save(state);
  };

  TrainResult result;
  result.step = step;
  result.main_process = dp.is_main();
  result.group = dp.shared_group();
  if (step >= t.num_steps) {
    log_info("model dir already holds step ", step, " >= train.num_steps ", t.num_steps, ": nothing to train");
    if (auto latest = checkpoints.latest()) result.last_checkpoint = *latest;
    return result;
  }

  Loader loader = make_train_loader(config, data, *trainee.model, dp, device, step, resumed_from);
  // Written once every check has passed: a resume refused for a changed config keeps the old file.
  if (dp.is_main()) write_file_atomic(model_dir + "/pipeline.yaml", config_to_yaml(config));
  // What the model sees (Ultralytics' train_batch picture): the first examples of this run.
  if (dp.is_main()) write_train_batch_picture(model_dir, config, data, loader, step);
  std::unique_ptr<MetricsJsonlWriter> metrics;  // only rank 0 writes logs and summaries
  std::unique_ptr<EventWriter> events;
  if (dp.is_main()) {
    metrics = std::make_unique<MetricsJsonlWriter>(model_dir + "/metrics.jsonl");
    events = std::make_unique<EventWriter>(model_dir + "/train");
  }
  dp.synchronise_batch_norm(*trainee.model);
  dp.attach(trainee.params.tensors());
  const std::function<std::vector<EvalReport>(int64_t)> periodic_eval = periodic_evaluation(config, model_dir, trainee, dp);
  Progress progress("step", step, t.num_steps, "steps/s");
  log_info("training ", config.model.type, " on ", device.str(),
           t.mixed_precision == "none" ? std::string() : " (" + t.mixed_precision + " mixed precision)", " for ",
           t.num_steps - step, " steps, batch ", t.batch_size, ", ", trainee.params.trainable.size(),
           " trainable tensors (", trainee.params.frozen.size(), " frozen)");

  // The host reads the losses and the step's health only where it needs them: on steps that log,
  // save, evaluate or stop, the first and the last (and every step on the CPU, where reading
  // costs nothing). Other steps queue their work without waiting for the device.
  StepHealth health(trainee.scaler != nullptr);
  const bool read_every_step = reads_every_step(device);
  std::string last_read;  // the progress line's loss between two reads
  int64_t last_read_step = step;
  bool first = true;
  auto last_log_time = std::chrono::steady_clock::now();
  int64_t last_log_step = step;
  StepProfiler profiler(t.profile, step, model_dir, dp.is_main(), device.is_cuda());
  while (step < t.num_steps) {
    profiler.before_step(step);
    Batch batch;
    {
      DETSEG_PROFILE_SCOPE("detseg::wait_for_batch");
      DETSEG_CHECK(loader.next(batch), "training loader ended unexpectedly");
    }
    const StepOutcome s = optimisation_step(trainee, to_device(batch, device), step, t, dp);
    ++step;
    if (trainee.ema) {
      DETSEG_PROFILE_SCOPE("detseg::ema");
      trainee.ema->update(*trainee.model, step);
    }
    health.record(step, s.total, s.grad_norm, s.l2, s.losses.parts, s.skipped);
    profiler.after_step(step);

    const bool log_now = step % t.log_every == 0 || step == t.num_steps;
    const bool save_due = checkpoints.due(step) || step == t.num_steps;
    const bool eval_due = periodic_eval && step % config.eval.every_steps == 0;
    const bool read_now = read_every_step || first || log_now || save_due || eval_due;
    StepHealth::Reading reading;
    bool stop = false;
    if (read_now) {
      std::tie(reading, stop) = check_health(health, dp, checkpoints, trainee.scaler.get());
    } else {
      stop = dp.vote(-1, stop_signal() != 0).stop;
      // Every rank heard the stop at this same step: read before the checkpoint, together.
      if (stop) reading = check_health(health, dp, checkpoints, trainee.scaler.get()).first;
    }
    const bool have_reading = read_now || stop;
    if (have_reading) {
      if (first) result.first_loss = reading.latest.total;
      result.last_loss = reading.latest.total;
      last_read = str("loss ", reading.latest.total);
      last_read_step = step;
    }
    first = false;

    std::string summary = read_now ? last_read : str(last_read, " (at step ", last_read_step, ")");
    if (log_now) {
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - last_log_time).count();
      const MetricsRecord record = step_record(reading.latest, s.lr, step,
                                               seconds > 0 ? static_cast<double>(step - last_log_step) / seconds : 0.0, dp);
      last_log_time = now;
      last_log_step = step;
      if (metrics) {
        metrics->write(record);
        for (auto& [name, value] : record.values) events->add_scalar(name, value, step);
        events->flush();
      }
      for (const auto& [name, value] : reading.latest.parts) summary += str(" ", name, " ", value);
    }
    summary += str(" lr ", s.lr);
    if (dp.is_main()) progress.report(step, summary, log_now);

    // Checkpoints, a stop signal, the periodic evaluation.
    if (save_due || stop) result.last_checkpoint = dp.is_main() ? save(step) : checkpoints.path_for_step(step);
    if (stop) {
      const int signal = stop_signal() ? stop_signal() : SIGTERM;  // a rank without the signal stops with its peers
      if (dp.is_main()) progress.end_line();
      throw Interrupted(signal, str("training stopped by ", signal_name(signal), " after step ", step, "; checkpoint ",
                                    result.last_checkpoint, " saved. Run the same command again to resume"));
    }
    if (eval_due) {
      try {
        std::vector<EvalReport> evaluations = periodic_eval(step);
        if (step == t.num_steps) result.final_evaluations = std::move(evaluations);
      } catch (const Interrupted& stop) {
        // Stopped during the evaluation: the step's weights are still worth keeping.
        if (!checkpoints.due(step) && step != t.num_steps && dp.is_main()) result.last_checkpoint = save(step);
        throw Interrupted(stop.signal(), str("training stopped by ", signal_name(stop.signal()), " after step ", step,
                                             " (during its evaluation); checkpoint ", result.last_checkpoint,
                                             " saved. Run the same command again to resume"));
      }
    }
  }
  profiler.end_of_run(step);
  result.step = step;
  log_info("saved ", result.last_checkpoint);
  return result;
}

}  // namespace detseg

#include "detseg/engine/train_loop.h"

#include <nlohmann/json.hpp>
#include <torch/optim.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/core/progress.h"
#include "detseg/core/stop_signal.h"
#include "detseg/dist/data_parallel.h"
#include "detseg/engine/device.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/inputs.h"
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
  static const std::pair<int64_t, int> at = [] {
    const char* v = std::getenv("DETSEG_INJECT_NAN_LOSS");
    if (v == nullptr || *v == '\0') return std::pair<int64_t, int>{-1, -1};
    long long s = -1;
    int r = -1;
    if (std::sscanf(v, "%lld:%d", &s, &r) < 1) throw ConfigError(str("DETSEG_INJECT_NAN_LOSS='", v, "' is not STEP or STEP:RANK"));
    return std::pair<int64_t, int>{s, r};
  }();
  return step == at.first && (at.second < 0 || rank == at.second);
}

// ---- The steps of train_model, in the order it runs them.

// One trainer per model dir: a second one would interleave checkpoints and logs. Rank 0 (or the
// only process) holds the lock; the other ranks of its run share the dir by design.
std::unique_ptr<DirectoryLock> claim_model_dir(const PipelineConfig& config, const std::string& model_dir) {
  make_directories(model_dir);
  if (const char* rank = std::getenv("RANK"); rank != nullptr && std::string(rank) != "0") return nullptr;
  auto lock = std::make_unique<DirectoryLock>(model_dir, "another detseg train");
  log_to_file(model_dir + "/train.log");  // what this run prints, appended run after run
  append_to_log_file(str("detseg train: ", config.source, " -> ", model_dir));
  if (int removed = remove_stale_temp_files(model_dir))
    log_debug("removed ", removed, " temporary files left by a killed run in ", model_dir);
  return lock;
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
  if (std::string extra = model_fine_tune_exclude(config); !extra.empty())
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
// Empty when periodic evaluation is off.
std::function<void(int64_t)> periodic_evaluation(const PipelineConfig& config, const std::string& model_dir,
                                                 Trainee& trainee, dist::DataParallel& dp) {
  if (config.eval.every_steps <= 0 || evaluation_sets(config).empty()) return {};
  std::shared_ptr<EvalRecorder> recorder;
  if (dp.is_main()) recorder = std::make_shared<EvalRecorder>(model_dir + "/eval");
  return [&config, &trainee, &dp, recorder](int64_t at_step) {
    const NamedTensors rng = rng_states();
    std::vector<EvalReport> evaluations;
    {
      EmaScope averages(trainee.ema.get(), *trainee.model);
      evaluations = evaluate_model_on_sets(config, *trainee.model, at_step, dp.group(), /*per_class=*/false);
    }
    trainee.model->train();
    restore_rng_states(rng);
    if (!recorder) return;
    std::string headline;
    for (const EvalReport& evaluation : evaluations) {
      recorder->write(evaluation);
      const std::string prefix = evaluation.set_name.empty() ? "" : evaluation.set_name + "/";
      for (size_t i = 0; i < evaluation.scalars.size() && i < 2; ++i)
        headline += str(" ", prefix, evaluation.scalars[i].first, " ", evaluation.scalars[i].second);
    }
    log_info("evaluation at step ", at_step, ":", headline);
  };
}

// What one optimisation step gives the rest of the loop.
struct StepOutcome {
  ModelLosses losses;
  at::Tensor l2;
  double total = 0;      // loss + L2, on the host
  double grad_norm = 0;  // before clipping
  double lr = 0;
  bool stop = false;     // a stop signal reached some rank: every rank stops after this step
};

// Forward (autocast), backward, gradient all-reduce, unscale and clip, then the update, or a skip
// (fp16 overflow) or a stop with the last good checkpoint named (a non-finite loss or gradient on
// any rank). `overflow_skips` counts consecutive fp16 skips. One host sync: loss, gradient norm and
// the overflow flag come back together.
StepOutcome optimisation_step(Trainee& trainee, const Batch& batch, int64_t step, const TrainConfig& t,
                              dist::DataParallel& dp, CheckpointManager& checkpoints, int64_t& overflow_skips) {
  StepOutcome out;
  out.lr = learning_rate_at(trainee.schedule, step);
  trainee.optimizer.set_learning_rate(out.lr);
  trainee.optimizer.optimizer->zero_grad();
  trainee.model->set_step(step);
  {
    AutocastScope autocast(batch.images.device(), t.mixed_precision);
    out.losses = trainee.model->losses(batch);
  }
  out.l2 = l2_regularization_loss(trainee.params, trainee.opt_options.l2_weight);
  const at::Tensor total = out.losses.total + out.l2;
  LossScaler* scaler = trainee.scaler.get();
  (scaler ? scaler->scale(total) : total).backward();
  dp.average_gradients();
  const at::Tensor found_inf = scaler ? scaler->unscale_gradients(trainee.params.tensors()) : at::Tensor();
  const at::Tensor grad_norm_t =
      clip_gradients_by_global_norm_async(trainee.params.tensors(), trainee.opt_options.clip_gradients_norm);
  std::vector<at::Tensor> readback = {total.detach().to(at::kDouble).reshape({1}),
                                      grad_norm_t.to(total.device()).reshape({1})};
  if (scaler) readback.push_back(found_inf.to(at::kDouble));
  const at::Tensor host = at::cat(readback).cpu();
  out.total = host[0].item<double>();
  out.grad_norm = host[1].item<double>();
  const bool overflow = scaler && host[2].item<double>() != 0;
  // A non-finite loss, or a finite loss with a non-finite gradient, stops before the update: the
  // weights and the checkpoints stay those of the last good step. With fp16 an overflow first
  // skips the step and lowers the loss scale, as torch.amp.GradScaler does.
  // Steps are numbered as metrics.jsonl numbers them: the step that would make `step + 1` updates.
  auto stop_non_finite = [&](const std::string& what, double value) {
    std::string parts;
    for (auto& [name, part] : out.losses.parts) parts += str(" ", name, "=", part.item<double>());
    auto latest = checkpoints.latest();
    throw Error(str(what, " is ", value, " at step ", step + 1, " (", parts, " ); training stopped. The last good "
                    "checkpoint is ", latest ? *latest : std::string("(none)"),
                    ". HINT: lower train.schedule.learning_rate or enable train.clip_gradients_norm"));
  };
  if (injected_nan_loss(step + 1, dp.rank())) out.total = std::nan("");
  const bool skip_for_overflow = overflow && ++overflow_skips <= 50;
  if (!overflow) overflow_skips = 0;
  // Every rank learns whether any rank's loss is non-finite, so all stop at this step together
  // (otherwise the others would wait for the failed rank at the next collective until the timeout).
  // The same vote carries a stop signal (SIGINT/SIGTERM): every rank finishes this step and stops.
  const dist::DataParallel::StepVote vote = dp.vote(!skip_for_overflow && !std::isfinite(out.total), stop_signal() != 0);
  if (vote.failed_rank == dp.rank()) stop_non_finite("loss", out.total);
  if (vote.failed_rank >= 0)
    throw Error(str("the loss of rank ", vote.failed_rank, " is not finite at step ", step + 1,
                    "; training stopped on every rank. The last good checkpoint is ",
                    checkpoints.latest().value_or("(none)"), " (rank ", vote.failed_rank, "'s log has the details)"));
  if (skip_for_overflow) {
    scaler->update(found_inf);
    log_debug("fp16 overflow at step ", step, ": step skipped, loss scale now ", scaler->current_scale());
  } else {
    if (!std::isfinite(out.grad_norm)) stop_non_finite("gradient norm", out.grad_norm);
    trainee.optimizer.optimizer->step();
    if (scaler) scaler->update(found_inf);
  }
  out.stop = vote.stop;
  return out;
}

// A logged step's record: the losses averaged over ranks (every rank takes part in the all-reduce),
// the learning rate, the gradient norm, the speed since the last record and the all-reduce timings.
MetricsRecord step_record(const StepOutcome& s, int64_t step, double steps_per_s, dist::DataParallel& dp) {
  std::vector<std::pair<std::string, double>> loss_values = {{"total_loss", s.total}};
  for (auto& [name, value] : s.losses.parts) loss_values.push_back({name, value.item<double>()});
  loss_values.push_back({"l2_loss", s.l2.item<double>()});
  dp.average_across_ranks(loss_values);
  MetricsRecord record;
  record.step = step;
  record.time = unix_time_now();
  record.split = "train";
  record.values = loss_values;
  record.values.push_back({"learning_rate", s.lr});
  record.values.push_back({"grad_norm", s.grad_norm});
  record.values.push_back({"steps_per_s", steps_per_s});
  for (auto& timing : dp.step_timings()) record.values.push_back(timing);
  return record;
}

}  // namespace

TrainResult train_model(const PipelineConfig& config, const std::string& model_dir) {
  const TrainConfig& t = config.train;
  const at::Device device = resolve_device(config.device);  // before anything slow: a wrong --device fails at once
  const std::unique_ptr<DirectoryLock> lock = claim_model_dir(config, model_dir);
  dist::DataParallel dp(t.distributed, device);  // one process unless torchrun's variables say otherwise
  if (dp.is_main()) write_file_atomic(model_dir + "/pipeline.yaml", config_to_yaml(config));
  at::manual_seed(static_cast<uint64_t>(t.seed));

  const InputData data = make_input_data(config, config.train_input, /*training=*/true);
  DETSEG_CONFIG_CHECK(data.num_classes == config.model.num_classes, location(config.source),
                      "model.num_classes is ", config.model.num_classes, " but ", config.train_input.annotations,
                      " defines ", data.num_classes, " categories");
  Trainee trainee = build_trainee(config, device, dp.world_size());
  CheckpointManagerOptions ckpt_options;
  ckpt_options.model_dir = model_dir;
  ckpt_options.keep = static_cast<int>(t.keep_checkpoints);
  ckpt_options.save_every_steps = t.checkpoint_every;
  CheckpointManager checkpoints(ckpt_options);
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
  std::unique_ptr<MetricsJsonlWriter> metrics;  // only rank 0 writes logs and summaries
  std::unique_ptr<EventWriter> events;
  if (dp.is_main()) {
    metrics = std::make_unique<MetricsJsonlWriter>(model_dir + "/metrics.jsonl");
    events = std::make_unique<EventWriter>(model_dir + "/train");
  }
  dp.synchronise_batch_norm(*trainee.model);
  dp.attach(trainee.params.tensors());
  const std::function<void(int64_t)> periodic_eval = periodic_evaluation(config, model_dir, trainee, dp);
  Progress progress("step", step, t.num_steps, "steps/s");
  log_info("training ", config.model.type, " on ", device.str(),
           t.mixed_precision == "none" ? std::string() : " (" + t.mixed_precision + " mixed precision)", " for ",
           t.num_steps - step, " steps, batch ", t.batch_size, ", ", trainee.params.trainable.size(),
           " trainable tensors (", trainee.params.frozen.size(), " frozen)");

  bool first = true;
  auto last_log_time = std::chrono::steady_clock::now();
  int64_t last_log_step = step;
  int64_t overflow_skips = 0;  // fp16: consecutive steps skipped for inf/NaN gradients
  while (step < t.num_steps) {
    Batch batch;
    DETSEG_CHECK(loader.next(batch), "training loader ended unexpectedly");
    const StepOutcome s = optimisation_step(trainee, to_device(batch, device), step, t, dp, checkpoints, overflow_skips);
    ++step;
    if (trainee.ema) trainee.ema->update(*trainee.model, step);
    if (first) result.first_loss = s.total;
    first = false;
    result.last_loss = s.total;

    // Logging: the parts are read only on logged steps (each item() is a host sync on the GPU).
    const bool log_now = step % t.log_every == 0 || step == t.num_steps;
    std::string summary = str("loss ", s.total);
    if (log_now) {
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - last_log_time).count();
      const MetricsRecord record =
          step_record(s, step, seconds > 0 ? static_cast<double>(step - last_log_step) / seconds : 0.0, dp);
      last_log_time = now;
      last_log_step = step;
      if (metrics) {
        metrics->write(record);
        for (auto& [name, value] : record.values) events->add_scalar(name, value, step);
        events->flush();
      }
      for (auto& [name, value] : s.losses.parts) summary += str(" ", name, " ", value.item<double>());
    }
    summary += str(" lr ", s.lr);
    if (dp.is_main()) progress.report(step, summary, log_now);

    // Checkpoints, a stop signal, the periodic evaluation.
    if (checkpoints.due(step) || step == t.num_steps || s.stop)
      result.last_checkpoint = dp.is_main() ? save(step) : checkpoints.path_for_step(step);
    if (s.stop) {
      const int signal = stop_signal() ? stop_signal() : SIGTERM;  // a rank without the signal stops with its peers
      if (dp.is_main()) progress.end_line();
      throw Interrupted(signal, str("training stopped by ", signal_name(signal), " after step ", step, "; checkpoint ",
                                    result.last_checkpoint, " saved. Run the same command again to resume"));
    }
    if (periodic_eval && step % config.eval.every_steps == 0) {
      try {
        periodic_eval(step);
      } catch (const Interrupted& stop) {
        // Stopped during the evaluation: the step's weights are still worth keeping.
        if (!checkpoints.due(step) && step != t.num_steps && dp.is_main()) result.last_checkpoint = save(step);
        throw Interrupted(stop.signal(), str("training stopped by ", signal_name(stop.signal()), " after step ", step,
                                             " (during its evaluation); checkpoint ", result.last_checkpoint,
                                             " saved. Run the same command again to resume"));
      }
    }
  }
  result.step = step;
  log_info("saved ", result.last_checkpoint);
  return result;
}

}  // namespace detseg

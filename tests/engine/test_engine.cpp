// The training engine end to end on the bundled demo data with a tiny RetinaNet-R18 (128 px):
// exact resume (N steps straight == N/2, stop, resume, N/2: bit-identical weights, EMA and
// optimizer state on CPU), a non-finite loss stopping training with the step and the last good
// checkpoint named, periodic evaluation during training (eval.every_steps), and
// `detseg eval --continuous` watching a live `detseg train`.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/inputs.h"
#include "detseg/engine/step_profiler.h"
#include "detseg/engine/train_loop.h"
#include "detseg/eval/voc_ap.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/optimizer.h"
#include "temp_dir.h"
#include "test_paths.h"

#include <torch/optim/sgd.h>

namespace fs = std::filesystem;
using detseg::testing::read_text;

namespace {

// 4 demo images (with their boxes) for training, 2 for evaluation.
const fs::path& workdir() {
  static const fs::path dir = [] {
    static const detseg::testing::TempDir d_temp("test_engine");  // for the whole program
    fs::path d = d_temp.path();
    fs::remove_all(d);
    fs::create_directories(d);
    detseg::CocoDataset all = detseg::read_coco(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json");
    auto subset = [&](size_t first, size_t count, const fs::path& out) {
      detseg::CocoDataset s;
      s.categories = all.categories;
      for (size_t i = first; i < first + count; ++i) s.images.push_back(all.images[i]);
      for (const auto& a : all.annotations)
        for (const auto& img : s.images)
          if (a.image_id == img.id) s.annotations.push_back(a);
      detseg::write_coco(s, out.string());
    };
    subset(0, 4, d / "train4.json");
    subset(4, 2, d / "eval2.json");
    return d;
  }();
  return dir;
}

// Trainable batch norm, momentum, a warm-up + drop schedule that does not depend on num_steps,
// EMA, flips and scale jitter: every piece of state a resume must restore.
std::string config_yaml() {
  const std::string images = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";
  return "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, fpn_channels: 32,\n"
         "        frozen_batch_norm: false, trainable_backbone_stages: 5}\n"
         "train: {batch_size: 2, num_steps: 4, seed: 3, checkpoint_every: 2, log_every: 1,\n"
         "        moving_average_decay: 0.9, optimizer: {type: momentum, momentum: 0.9},\n"
         "        schedule: {type: stepwise, learning_rate: 0.01, warmup_steps: 1, warmup_init: 0.001,\n"
         "                   drop_steps: [3, 100]}}\n"
         "train_input: {annotations: '" + (workdir() / "train4.json").string() + "', images: '" + images +
         "', num_workers: 1, hflip: true, scale_min: 0.8, scale_max: 1.2}\n"
         "eval: {batch_size: 2}\n"
         "eval_input: {annotations: '" + (workdir() / "eval2.json").string() + "', images: '" + images +
         "', num_workers: 1}\n";
}

detseg::PipelineConfig make_config(const std::vector<std::string>& overrides = {}) {
  return detseg::parse_config(config_yaml(), (workdir() / "engine.yaml").string(), overrides);
}

std::string config_file() {
  const fs::path p = workdir() / "engine.yaml";
  std::ofstream(p) << config_yaml();
  return p.string();
}

void expect_same_tensors(const detseg::NamedTensors& a, const detseg::NamedTensors& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].first, b[k].first) << what;
    EXPECT_TRUE(at::equal(a[k].second, b[k].second)) << what << " " << a[k].first << " differs by "
                                                     << (a[k].second - b[k].second).abs().max().item<double>();
  }
}

// The momentum buffers of a checkpoint's optimizer state, in parameter order (the serialized bytes
// themselves key the state by tensor addresses, which differ between processes and runs).
std::vector<at::Tensor> momentum_buffers(const detseg::PipelineConfig& config, const std::string& bytes) {
  auto model = detseg::build_detector(config);
  detseg::ParameterSelection params = detseg::select_parameters(*model, config.train.optimizer);
  detseg::TrainOptimizer optimizer = detseg::build_optimizer(params, config.train.optimizer, 0.1);
  detseg::load_optimizer_state(*optimizer.optimizer, bytes);
  std::vector<at::Tensor> buffers;
  for (auto& group : optimizer.optimizer->param_groups())
    for (auto& p : group.params()) {
      auto it = optimizer.optimizer->state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.optimizer->state().end()) continue;
      buffers.push_back(static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer());
    }
  return buffers;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace

// Trains 4 steps straight and 2 + 2 with a resume in between; returns the straight run's last loss.
double check_resume_is_exact(const std::vector<std::string>& overrides, const std::string& name) {
  const fs::path straight = workdir() / (name + "_straight"), split = workdir() / (name + "_split");
  fs::remove_all(straight);
  fs::remove_all(split);
  auto config = [&](std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), overrides.begin(), overrides.end());
    return make_config(extra);
  };
  detseg::TrainResult a = detseg::train_model(config(), straight.string());
  EXPECT_EQ(a.step, 4);
  // Stop after 2 steps, then a new run on the same model dir resumes from ckpt-2.
  detseg::TrainResult b1 = detseg::train_model(config({"train.num_steps=2"}), split.string());
  EXPECT_EQ(b1.step, 2);
  detseg::TrainResult b2 = detseg::train_model(config(), split.string());
  EXPECT_EQ(b2.step, 4);

  detseg::Checkpoint ca = detseg::read_checkpoint((straight / "ckpt-4.dsckpt").string());
  detseg::Checkpoint cb = detseg::read_checkpoint((split / "ckpt-4.dsckpt").string());
  expect_same_tensors(ca.model, cb.model, "model");
  expect_same_tensors(ca.ema, cb.ema, "ema");
  expect_same_tensors(ca.rng, cb.rng, "rng");
  EXPECT_FALSE(ca.ema.empty());
  std::vector<at::Tensor> ma = momentum_buffers(make_config(), ca.optimizer);
  std::vector<at::Tensor> mb = momentum_buffers(make_config(), cb.optimizer);
  EXPECT_EQ(ma.size(), 96u);  // every trainable tensor has its momentum
  EXPECT_EQ(ma.size(), mb.size());
  if (ma.size() != mb.size()) return 0;
  for (size_t k = 0; k < ma.size(); ++k) EXPECT_TRUE(at::equal(ma[k], mb[k])) << "momentum " << k;
  // The loss of the last step is the same number, and training moved the weights.
  EXPECT_EQ(a.last_loss, b2.last_loss);
  detseg::Checkpoint c2 = detseg::read_checkpoint((straight / "ckpt-2.dsckpt").string());
  double change = 0;
  for (size_t k = 0; k < ca.model.size(); ++k)
    if (ca.model[k].second.is_floating_point())
      change = std::max(change, (ca.model[k].second - c2.model[k].second).abs().max().item<double>());
  EXPECT_GT(change, 1e-4);
  // The running statistics of the trainable batch norm moved too (they are part of the resume).
  bool bn_stats = false;
  for (auto& [tensor_name, t] : ca.model)
    if (tensor_name.find("running_mean") != std::string::npos && t.abs().sum().item<double>() > 0) bn_stats = true;
  EXPECT_TRUE(bn_stats);
  return a.last_loss;
}

TEST(Engine, ResumeIsExact) { check_resume_is_exact({}, "fp32"); }

// bf16 autocast on the CPU: the resume is as exact, and the losses are not fp32's (autocast ran).
TEST(Engine, ResumeIsExactWithBf16MixedPrecision) {
  const double bf16 = check_resume_is_exact({"train.mixed_precision=bf16"}, "bf16");
  const fs::path fp32 = workdir() / "fp32_reference";
  fs::remove_all(fp32);
  const double reference = detseg::train_model(make_config(), fp32.string()).last_loss;
  EXPECT_NE(bf16, reference);
  EXPECT_NEAR(bf16, reference, 0.05 * std::abs(reference));
}

TEST(Engine, NonFiniteLossStopsWithStepAndLastGoodCheckpoint) {
  const fs::path dir = workdir() / "nan";
  fs::remove_all(dir);
  // A rate far too high makes the loss overflow within a few steps; a checkpoint after each step.
  detseg::PipelineConfig config =
      make_config({"train.num_steps=30", "train.checkpoint_every=1", "train.keep_checkpoints=3",
                   "train.schedule.type=constant",
                   "train.schedule.learning_rate=100", "train.schedule.warmup_steps=0", "train.moving_average_decay=0"});
  std::string message;
  try {
    detseg::train_model(config, dir.string());
  } catch (const detseg::Error& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "30 steps at rate 100 stayed finite";
  std::printf("%s\n", message.c_str());
  detseg::CheckpointManager manager(detseg::CheckpointManagerOptions{dir.string(), 3, 1});
  auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value()) << message;
  detseg::Checkpoint good = detseg::read_checkpoint(*latest);
  // The message names the failing step as metrics.jsonl numbers it (one past the last checkpoint's
  // step) and that checkpoint, which loads and holds finite weights.
  EXPECT_NE(message.find(" at step " + std::to_string(good.step + 1) + " "), std::string::npos) << message;
  EXPECT_NE(message.find("The last good checkpoint is " + *latest), std::string::npos) << message;
  EXPECT_GE(good.step, 1);
  for (auto& [name, t] : good.model)
    if (t.is_floating_point()) {
      EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << name;
    }
  auto model = detseg::build_detector(config);
  EXPECT_EQ(detseg::load_weights_for_eval(*latest, *model), good.step);
  EXPECT_FALSE(fs::exists(manager.path_for_step(good.step + 1)));
}

// The GPU's way of reading (DETSEG_LAZY_HOST_READS=1 makes the CPU read as a GPU run does: only on
// steps that log, save or evaluate): a NaN loss at step 6 is skipped by the optimizer on the device,
// steps 7 and 8 go on from good weights, and the read at step 8 stops the run naming step 6, before
// step 8's checkpoint is written. The last good checkpoint is step 4's.
TEST(Engine, NonFiniteLossFoundAtTheNextReadStillNamesItsStep) {
  const fs::path dir = workdir() / "nan_lazy";
  fs::remove_all(dir);
  ::setenv("DETSEG_LAZY_HOST_READS", "1", 1);
  ::setenv("DETSEG_INJECT_NAN_LOSS", "6", 1);
  std::string message;
  try {
    detseg::train_model(make_config({"train.num_steps=12", "train.checkpoint_every=4", "train.log_every=4"}),
                        dir.string());
  } catch (const detseg::Error& e) {
    message = e.what();
  }
  ::unsetenv("DETSEG_LAZY_HOST_READS");
  ::unsetenv("DETSEG_INJECT_NAN_LOSS");
  ASSERT_FALSE(message.empty()) << "the NaN at step 6 was not reported";
  EXPECT_NE(message.find("loss is nan at step 6 ("), std::string::npos) << message;
  const std::string good = (dir / "ckpt-4.dsckpt").string();
  EXPECT_NE(message.find("The last good checkpoint is " + good), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir / "ckpt-8.dsckpt"));
  // The log has steps 4 (finite) and no step 8 record: the run stopped at the read.
  std::vector<nlohmann::json> rows = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["step"], 4);
  EXPECT_TRUE(std::isfinite(rows[0]["total_loss"].get<double>()));
}

TEST(Engine, EvaluatesEveryNStepsDuringTraining) {
  const fs::path dir = workdir() / "periodic";
  fs::remove_all(dir);
  detseg::TrainResult r = detseg::train_model(make_config({"eval.every_steps=2", "train.checkpoint_every=100"}),
                                                 dir.string());
  ASSERT_EQ(r.step, 4);
  // Evaluations at steps 2 and 4 land in model_dir/eval/ (JSONL, events, eval-<step>.json), the
  // same place `eval --continuous` writes.
  std::vector<nlohmann::json> rows = read_jsonl(dir / "eval" / "metrics.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["step"], 2);
  EXPECT_EQ(rows[1]["step"], 4);
  for (const auto& row : rows) {
    EXPECT_EQ(row["split"], "eval");
    EXPECT_GE(row["AP"].get<double>(), 0.0);
    EXPECT_LE(row["AP"].get<double>(), 1.0);
    EXPECT_TRUE(std::isfinite(row["total_loss"].get<double>()));
  }
  // The train log (every step here): loss parts, L2, rate, gradient norm and speed.
  std::vector<nlohmann::json> train_rows = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(train_rows.size(), 4u);
  for (const char* key : {"total_loss", "cls_loss", "box_loss", "l2_loss", "learning_rate", "grad_norm"})
    EXPECT_TRUE(train_rows[3].contains(key)) << key << " " << train_rows[3].dump();
  EXPECT_DOUBLE_EQ(train_rows[3]["learning_rate"].get<double>(), 0.001);  // after the drop at step 3
  EXPECT_GT(train_rows[3]["grad_norm"].get<double>(), 0.0);
  EXPECT_GT(train_rows[3]["steps_per_s"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(dir / "eval" / "eval-2.json"));
  EXPECT_TRUE(fs::exists(dir / "eval" / "eval-4.json"));
}

// Each periodic evaluation scores its step's weights, as evaluating that step's checkpoint does. The
// engine config above has EMA (its averages are copied into the model for each evaluation); this
// run has none, so the evaluations see the trained weights themselves, and the second one must not
// reuse the inference weights packed at the first. Until the optimizer bumped the parameters'
// versions it did: eval-20.json said AP 0.005 (the step-10 head's) where ckpt-20 scores 0.022.
TEST(Engine, EachPeriodicEvaluationWithoutEmaScoresThatStepsCheckpoint) {
  const fs::path dir = workdir() / "periodic_no_ema";
  fs::remove_all(dir);
  const detseg::PipelineConfig config =
      detseg::load_config(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/learning/retinanet_overfit.yaml",
                          {"train.num_steps=20", "eval.every_steps=10", "train.checkpoint_every=10"});
  ASSERT_EQ(config.train.moving_average_decay, 0.0);
  const detseg::TrainResult r = detseg::train_model(config, dir.string());
  ASSERT_EQ(r.step, 20);
  for (const int step : {10, 20}) {
    auto model = detseg::load_detector(config, (dir / ("ckpt-" + std::to_string(step) + ".dsckpt")).string());
    const detseg::EvalReport checkpoint = detseg::evaluate_model(config, *model, step);
    const nlohmann::json single = nlohmann::json::parse(checkpoint.json);
    const nlohmann::json periodic =
        nlohmann::json::parse(read_text(dir / "eval" / ("eval-" + std::to_string(step) + ".json")));
    EXPECT_GT(single["stats"][0].get<double>(), 0.0) << step << ": nothing found, so nothing compared";
    for (size_t i = 0; i < 12; ++i)
      EXPECT_NEAR(periodic["stats"][i].get<double>(), single["stats"][i].get<double>(), 1e-6) << step << " " << i;
  }
}

TEST(Engine, ContinuousEvalWatchesALiveTrainer) {
  const fs::path dir = workdir() / "live";
  fs::remove_all(dir);
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 1 ";
  const pid_t trainer = detseg::testing::start_background(
      bin + "train --config " + config_file() + " --model-dir " + dir.string() +
          " --set train.num_steps=6 --set train.checkpoint_every=2 --set \"eval_input.annotations=''\"",
      workdir() / "live-train.log");
  // train.num_steps is raised for the evaluator so it does not stop at the trainer's last step: it
  // must stop because no new checkpoint came for --wait-interval seconds.
  const double wait = 8;
  detseg::testing::CommandRun ev = detseg::testing::run_command(
      bin + "eval --config " + config_file() + " --continuous --checkpoint-dir " + dir.string() +
      " --wait-interval " + std::to_string(wait) + " --set train.num_steps=1000");
  const auto eval_end = fs::file_time_type::clock::now();
  const int trainer_status = detseg::testing::wait_for(trainer, 60);
  ASSERT_TRUE(WIFEXITED(trainer_status) && WEXITSTATUS(trainer_status) == 0) << read_text(workdir() / "live-train.log");
  ASSERT_EQ(ev.code, 0) << ev.output;
  EXPECT_NE(ev.output.find("no new checkpoint for 8 s; stopping"), std::string::npos) << ev.output;
  // Each checkpoint evaluated at most once, in step order, the final one included.
  std::vector<nlohmann::json> rows = read_jsonl(dir / "eval" / "metrics.jsonl");
  ASSERT_FALSE(rows.empty()) << ev.output;
  int64_t previous = 0;
  for (const auto& row : rows) {
    const int64_t step = row["step"].get<int64_t>();
    EXPECT_GT(step, previous) << ev.output;
    EXPECT_EQ(step % 2, 0);
    EXPECT_TRUE(fs::exists(dir / "eval" / ("eval-" + std::to_string(step) + ".json")));
    previous = step;
  }
  EXPECT_EQ(previous, 6) << ev.output;
  std::printf("continuous eval evaluated steps:");
  for (const auto& row : rows) std::printf(" %lld", static_cast<long long>(row["step"].get<int64_t>()));
  std::printf("\n");
  // It stopped a wait interval after the last checkpoint appeared, not before.
  const double idle = std::chrono::duration<double>(eval_end - fs::last_write_time(dir / "ckpt-6.dsckpt")).count();
  EXPECT_GE(idle, wait - 0.5);
  EXPECT_LT(idle, wait + 20);
  bool events = false;
  for (const auto& entry : fs::directory_iterator(dir / "eval"))
    if (entry.path().filename().string().find("tfevents") != std::string::npos) events = true;
  EXPECT_TRUE(events);
}

TEST(Engine, EvalWritesDetectionsThatCocoEvalRescoresIdentically) {
  const fs::path dir = workdir() / "detections";
  fs::remove_all(dir);
  detseg::TrainResult r = detseg::train_model(make_config({"train.num_steps=2"}), dir.string());
  ASSERT_EQ(r.step, 2);
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 1 ";
  const fs::path metrics = dir / "metrics-2.json";
  detseg::testing::CommandRun e = detseg::testing::run_command(
      bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint + " --json " + metrics.string() +
      " --set postprocess.score_threshold=0.01");  // two steps of training score low
  ASSERT_EQ(e.code, 0) << e.output;
  // By default the results file goes next to the checkpoint, as continuous evaluation writes it.
  const fs::path detections = dir / "eval" / "detections-2.json";
  ASSERT_TRUE(fs::exists(detections)) << e.output;
  EXPECT_NE(e.output.find("detections (COCO results format) written to " + detections.string()), std::string::npos)
      << e.output;
  // The file carries the data set's image and category ids: coco-eval scores it to the same 12 numbers.
  const fs::path rescored = dir / "rescored.json";
  detseg::testing::CommandRun c = detseg::testing::run_command(bin + "coco-eval --gt " + (workdir() / "eval2.json").string() +
                                                               " --dt " + detections.string() + " --json " + rescored.string());
  ASSERT_EQ(c.code, 0) << c.output;
  const nlohmann::json a = nlohmann::json::parse(read_text(metrics)), b = nlohmann::json::parse(read_text(rescored));
  for (size_t i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(a["stats"][i].get<double>(), b["stats"][i].get<double>()) << i;
  // ... and its ids are the file's own (demo image ids are not 0..N-1, category ids start at 1).
  const detseg::CocoDataset gt = detseg::read_coco((workdir() / "eval2.json").string());
  const nlohmann::json results = nlohmann::json::parse(read_text(detections));
  ASSERT_GT(results.size(), 0u);
  std::set<int64_t> seen_images;
  for (const auto& d : results) {
    seen_images.insert(d["image_id"].get<int64_t>());
    EXPECT_TRUE(gt.category_index.count(d["category_id"].get<int64_t>())) << d.dump();
  }
  std::set<int64_t> gt_images;
  for (const auto& image : gt.images) gt_images.insert(image.id);
  EXPECT_EQ(seen_images, gt_images);

  // eval.metric voc: the same loop and detections, scored by the VOC devkit's rules (mAP only in
  // metrics.jsonl's sense; per-class AP in the JSON), equal to voc_evaluate on the results file.
  for (bool use_07 : {false, true}) {
    const fs::path voc = dir / (use_07 ? "voc07.json" : "voc.json");
    detseg::testing::CommandRun v = detseg::testing::run_command(
        bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint + " --json " + voc.string() +
        " --detections " + (dir / "voc-detections.json").string() + " --set postprocess.score_threshold=0.01" +
        " --set eval.metric=voc --set eval.voc_use_07_metric=" + (use_07 ? "true" : "false"));
    ASSERT_EQ(v.code, 0) << v.output;
    EXPECT_NE(v.output.find(use_07 ? "VOC mAP@0.5 (11-point) = " : "VOC mAP@0.5 (all-point) = "), std::string::npos)
        << v.output;
    const nlohmann::json j = nlohmann::json::parse(read_text(voc));
    detseg::VocEvalOptions o;
    o.use_07_metric = use_07;
    const detseg::VocEvalResult want =
        detseg::voc_evaluate(gt, detseg::read_coco_results((dir / "voc-detections.json").string(), gt), o);
    EXPECT_DOUBLE_EQ(j["mAP"].get<double>(), want.mean_ap) << j.dump();
    size_t scored = 0;
    for (double ap : want.ap) scored += ap >= 0;
    EXPECT_EQ(j["per_category_ap"].size(), scored);
    EXPECT_GT(scored, 0u);
    EXPECT_TRUE(j.contains("losses"));
    EXPECT_FALSE(j.contains("stats"));
  }
  // A metric for the other kind of model: one line, exit 2.
  detseg::testing::CommandRun wrong = detseg::testing::run_command(
      bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint + " --set eval.metric=miou");
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.output.find("eval.metric: miou scores label maps; a detector takes coco or voc"), std::string::npos)
      << wrong.output;

  // postprocess.nms from the command line: class-agnostic NMS leaves fewer boxes than per-class
  // (untrained classes overlap everywhere); soft-NMS decays scores instead of removing boxes, so
  // the best detection is the same and the others score no higher than before.
  auto detect_with = [&](const std::string& nms) {
    const fs::path out = dir / ("nms-" + nms + ".json");
    detseg::testing::CommandRun run = detseg::testing::run_command(
        bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint + " --no-metrics --detections " +
        out.string() + " --set postprocess.score_threshold=0.01 --set postprocess.max_detections_per_image=100000" +
        " --set postprocess.max_detection_points=0 --set postprocess.nms=" + nms);
    EXPECT_EQ(run.code, 0) << run.output;
    return nlohmann::json::parse(read_text(out));
  };
  const nlohmann::json per_class = detect_with("per_class"), agnostic = detect_with("class_agnostic"),
                       soft = detect_with("soft");
  EXPECT_GT(per_class.size(), results.size());  // no longer capped at 100 per image
  EXPECT_LT(agnostic.size(), per_class.size());
  auto best = [](const nlohmann::json& dets) {
    double top = 0;
    for (const auto& d : dets) top = std::max(top, d["score"].get<double>());
    return top;
  };
  ASSERT_GT(soft.size(), 0u);
  EXPECT_DOUBLE_EQ(best(soft), best(per_class));

  // Images without ground truth (a test-dev style list: images and categories only): --no-metrics
  // writes the same detections and nothing else.
  detseg::CocoDataset images_only = detseg::read_coco((workdir() / "eval2.json").string());
  images_only.annotations.clear();
  detseg::write_coco(images_only, (dir / "test-dev.json").string());
  const fs::path no_gt = dir / "no-gt-detections.json";
  detseg::testing::CommandRun n = detseg::testing::run_command(
      bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint + " --no-metrics --detections " +
      no_gt.string() + " --set eval_input.annotations=" + (dir / "test-dev.json").string() +
      " --set postprocess.score_threshold=0.01");
  ASSERT_EQ(n.code, 0) << n.output;
  EXPECT_EQ(n.output.find("Average Precision"), std::string::npos) << n.output;
  EXPECT_EQ(read_text(no_gt), read_text(detections));

  // The model dir keeps what was printed: train.log (from the library's train_model) and eval.log.
  const std::string train_log = read_text(dir / "train.log");
  EXPECT_NE(train_log.find("training retinanet on cpu for 2 steps"), std::string::npos) << train_log;
  EXPECT_NE(train_log.find("saved " + r.last_checkpoint), std::string::npos) << train_log;
  const std::string eval_log = read_text(dir / "eval.log");
  EXPECT_NE(eval_log.find("Average Precision  (AP) @[ IoU=0.50:0.95"), std::string::npos) << eval_log;
  EXPECT_NE(eval_log.find("detections (COCO results format) written to " + detections.string()), std::string::npos)
      << eval_log;

  // On a terminal (script(1) gives the command one) eval and predict draw a progress line with the
  // rate and ETA; the demo images keep their data set ids in predict's JSON.
  detseg::testing::CommandRun tty = detseg::testing::run_command(
      "script -qec \"" + bin + "eval --config " + config_file() + " --checkpoint " + r.last_checkpoint +
      " --detections " + (dir / "tty.json").string() + "\" /dev/null");
  EXPECT_EQ(tty.code, 0) << tty.output;
  EXPECT_NE(tty.output.find("eval 2/2 "), std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find(" img/s eta 0s"), std::string::npos) << tty.output;
  const fs::path two = dir / "two_images";
  fs::create_directories(two);
  for (const auto& image : gt.images)
    fs::copy_file(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images/" + image.file_name, two / image.file_name);
  tty = detseg::testing::run_command("script -qec \"" + bin + "predict --config " + config_file() + " --checkpoint " +
                                     r.last_checkpoint + " --input " + two.string() + " --output " +
                                     (dir / "predicted").string() + " --set postprocess.score_threshold=0.01\" /dev/null");
  EXPECT_EQ(tty.code, 0) << tty.output;
  EXPECT_NE(tty.output.find("predict 2/2 "), std::string::npos) << tty.output;
  const nlohmann::json predicted = nlohmann::json::parse(read_text(dir / "predicted" / "detections.json"));
  std::set<int64_t> predicted_ids;
  for (const auto& d : predicted) predicted_ids.insert(d["image_id"].get<int64_t>());
  EXPECT_EQ(predicted_ids, gt_images);
}

TEST(Engine, SeveralEvaluationSetsAreScoredAndLoggedByName) {
  const fs::path dir = workdir() / "eval_sets";
  fs::remove_all(dir);
  const std::string images = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";
  // eval_input plus a named set (the training images) and eval.on_train: 3 images.
  const std::vector<std::string> sets = {
      "eval.every_steps=2", "train.checkpoint_every=100", "eval.on_train=3",
      "eval_inputs.seen={annotations: '" + (workdir() / "train4.json").string() + "', images: '" + images +
          "', num_workers: 1}"};
  detseg::TrainResult r = detseg::train_model(make_config(sets), dir.string());
  ASSERT_EQ(r.step, 4);
  std::map<std::string, std::vector<int64_t>> steps_by_split;
  for (const auto& row : read_jsonl(dir / "eval" / "metrics.jsonl")) {
    steps_by_split[row["split"].get<std::string>()].push_back(row["step"].get<int64_t>());
    EXPECT_TRUE(row.contains("AP")) << row.dump();
  }
  const std::vector<int64_t> both = {2, 4};
  EXPECT_EQ(steps_by_split["eval"], both);
  EXPECT_EQ(steps_by_split["eval/seen"], both);
  EXPECT_EQ(steps_by_split["eval/train"], both);
  EXPECT_EQ(steps_by_split.size(), 3u);
  for (const char* file : {"eval-2.json", "eval-seen-2.json", "eval-train-4.json", "detections-seen-4.json"})
    EXPECT_TRUE(fs::exists(dir / "eval" / file)) << file;
  // Each set is the data it names: 2 eval images, 4 training images, the first 3 of them.
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "eval" / "eval-4.json"))["num_images"], 2);
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "eval" / "eval-seen-4.json"))["num_images"], 4);
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "eval" / "eval-train-4.json"))["num_images"], 3);
  // TensorBoard: one events file, a named set's tags carry its name.
  std::string events;
  for (const auto& entry : fs::directory_iterator(dir / "eval"))
    if (entry.path().filename().string().find("tfevents") != std::string::npos) events += read_text(entry.path());
  EXPECT_NE(events.find("eval/seen/AP"), std::string::npos);
  EXPECT_NE(events.find("eval/train/AP50"), std::string::npos);

  // detseg eval scores every set, or one with --eval-set, and --json keys them by name.
  std::string cmd = std::string(DETSEG_BINARY) + " --threads 1 eval --config " + config_file() + " --checkpoint " +
                    (dir / "ckpt-4.dsckpt").string() + " --set eval.on_train=3";
  for (size_t i = 3; i < sets.size(); ++i) cmd += " --set \"" + sets[i] + "\"";
  detseg::testing::CommandRun all = detseg::testing::run_command(cmd + " --json " + (dir / "all.json").string());
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("set seen (4 images):"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("set train (3 images):"), std::string::npos) << all.output;
  const nlohmann::json keyed = nlohmann::json::parse(read_text(dir / "all.json"));
  EXPECT_EQ(keyed["seen"]["stats"], nlohmann::json::parse(read_text(dir / "eval" / "eval-seen-4.json"))["stats"]);
  EXPECT_EQ(keyed["eval"]["num_images"], 2);
  detseg::testing::CommandRun one = detseg::testing::run_command(cmd + " --eval-set train");
  ASSERT_EQ(one.code, 0) << one.output;
  EXPECT_EQ(one.output.find("set seen"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("set train (3 images):"), std::string::npos) << one.output;
  detseg::testing::CommandRun bad = detseg::testing::run_command(cmd + " --eval-set nope");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--eval-set nope: no such evaluation set"), std::string::npos) << bad.output;
}

// input.max_images keeps the first images of the file, with exactly their annotations.
TEST(Inputs, MaxImagesKeepsTheFirstImagesAndTheirAnnotations) {
  const std::string annotations = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json";
  const detseg::CocoDataset all = detseg::read_coco(annotations);
  ASSERT_GT(all.images.size(), 3u);
  size_t expected_boxes = 0;
  for (const auto& a : all.annotations)
    for (size_t i = 0; i < 3; ++i) expected_boxes += a.image_id == all.images[i].id;
  detseg::InputConfig input;
  input.annotations = annotations;
  input.images = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";
  input.max_images = 3;
  auto dataset = detseg::make_detection_dataset(input, /*training=*/false);
  ASSERT_EQ(dataset->size(), 3);
  EXPECT_EQ(dataset->coco().annotations.size(), expected_boxes);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(dataset->coco().images[static_cast<size_t>(dataset->image_position(i))].id, all.images[static_cast<size_t>(i)].id);
  input.max_images = 0;
  EXPECT_EQ(detseg::make_detection_dataset(input, false)->size(), static_cast<int64_t>(all.images.size()));
}

// model.resizer keep_aspect (the reference's keep_aspect_ratio_resizer): 640x480 demo images with
// min_dimension 100 become 133x100, and each batch is padded to a multiple of 32 (160x128), not to
// a square. Both detector families make anchors for that size, train on it and evaluate through it.
TEST(Engine, KeepAspectResizerPadsEachBatchToAMultipleOf32) {
  for (const std::string type : {"retinanet", "faster_rcnn"}) {
    SCOPED_TRACE(type);
    std::vector<std::string> overrides = {"model.type=" + type, "model.resizer=keep_aspect", "model.min_dimension=100",
                                          "model.max_dimension=200", "train.num_steps=2"};
    if (type == "faster_rcnn")
      overrides.insert(overrides.end(), {"model.faster_rcnn.first_stage_box_predictor_depth=32",
                                         "model.faster_rcnn.representation_size=64"});
    const detseg::PipelineConfig config = make_config(overrides);
    auto model = detseg::build_detector(config);
    auto dataset = detseg::make_detection_dataset(config.eval_input, /*training=*/false);
    detseg::LoaderOptions options = detseg::make_loader_options(config, config.eval_input, false, 2, model->input_size());
    detseg::Loader loader(dataset->size(), [dataset](int64_t i) { return dataset->get(i); }, options);
    detseg::Batch batch;
    ASSERT_TRUE(loader.next(batch));
    EXPECT_EQ(batch.images.sizes(), (at::IntArrayRef{2, 3, 128, 160}));
    EXPECT_EQ(batch.image_sizes[0][0].item<int64_t>(), 100);
    EXPECT_EQ(batch.image_sizes[0][1].item<int64_t>(), 133);
    // Detections come back in the original 640x480 pixels.
    model->eval();
    {
      at::NoGradGuard no_grad;
      for (const detseg::Boxes& d : model->detect(batch))
        if (d.size() > 0) {
          EXPECT_LE(d.boxes.select(1, 2).max().item<float>(), 640.0f + 1e-3f);
          EXPECT_LE(d.boxes.select(1, 3).max().item<float>(), 480.0f + 1e-3f);
        }
    }
    // A square batch of another size is refused with the rule, not a LibTorch shape error.
    detseg::Batch odd = batch;
    odd.images = at::zeros({2, 3, 100, 100});
    try {
      model->detect(odd);
      ADD_FAILURE() << "a 100x100 batch was accepted";
    } catch (const detseg::Error& e) {
      EXPECT_NE(std::string(e.what()).find("multiples of 32"), std::string::npos) << e.what();
    }
    // Training (scale jitter 0.8-1.2 in this config: several batch sizes) and the final evaluation.
    const fs::path dir = workdir() / ("keep_aspect_" + type);
    fs::remove_all(dir);
    detseg::TrainResult r = detseg::train_model(config, dir.string());
    EXPECT_EQ(r.step, 2);
    EXPECT_TRUE(std::isfinite(r.last_loss));
    const detseg::EvalReport report = detseg::evaluate_checkpoint(config, r.last_checkpoint);
    EXPECT_EQ(report.num_images, 2);
    EXPECT_GE(report.scalars.size(), 12u) << report.text;
  }
}

// train.profile's table from hand-made events (times in ns, 2 steps): a copy inside a clone inside
// a contiguous inside ConvolutionBackward0's node inside the backward phase, a convolution backward
// beside it, and a loader thread's decode.
TEST(StepProfiler, SelfTimesPhasesAndCallersFromNestedEvents) {
  const std::vector<detseg::ProfiledEvent> events = {
      {"detseg::backward", 1, 0, 1000000},
      {"autograd::engine::evaluate_function: ConvolutionBackward0", 1, 100000, 940000},
      {"aten::contiguous", 1, 200000, 600000},
      {"aten::clone", 1, 250000, 550000},
      {"aten::copy_", 1, 300000, 500000},
      {"aten::convolution_backward", 1, 600000, 840000},
      {"aten::decode", 2, 0, 5000000},
  };
  const std::string table = detseg::profile_table(events, 1, 2, 10);
  auto line_of = [&](const std::string& start) {
    for (size_t at = 0; (at = table.find('\n' + start, at)) != std::string::npos; ++at) {
      const size_t end = table.find('\n', at + 1);
      const std::string line = table.substr(at + 1, end - at - 1);
      if (line.find("ms/step") == std::string::npos) return line;
    }
    return std::string();
  };
  // 1 ms of events on the training thread over 2 steps; the decode is the other thread's 5 ms.
  EXPECT_NE(table.find("training thread: 0.5 ms (other threads' events: 2.5 ms)"), std::string::npos) << table;
  // The phase's inclusive time (its line in the phase table, which comes first): the whole step.
  const std::string phase = line_of("detseg::backward");
  EXPECT_NE(phase.find(" 0.50 "), std::string::npos) << table;
  EXPECT_NE(phase.find(" 100.0 %"), std::string::npos) << table;
  // Self times: the copy 0.2 ms (0.10 a step, 20 %), called through clone < contiguous in the node.
  const std::string copy = line_of("aten::copy_");
  EXPECT_NE(copy.find(" 0.5 "), std::string::npos) << copy;  // one call in two steps
  EXPECT_NE(copy.find("0.10 "), std::string::npos) << copy;
  EXPECT_NE(copy.find("20.0 %"), std::string::npos) << copy;
  EXPECT_NE(copy.find("aten::clone < aten::contiguous [autograd::engine::evaluate_function: ConvolutionBackward0] 100 %"),
            std::string::npos)
      << copy;
  // The clone's self time is its 0.3 ms less the copy; the node's 0.84 ms less its two children's
  // 0.64; the phase's 1 ms less the node's 0.84 (host time between ops).
  EXPECT_NE(line_of("aten::clone").find(" 0.05 "), std::string::npos) << table;
  EXPECT_NE(line_of("autograd::engine::evaluate_function: ConvolutionBackward0").find(" 0.10 "), std::string::npos)
      << table;
  const size_t ops_table = table.find("op (by self time)");
  EXPECT_NE(table.find("\ndetseg::backward ", ops_table), std::string::npos) << table;
  EXPECT_NE(table.substr(table.find("\ndetseg::backward ", ops_table), 80).find(" 0.08 "), std::string::npos) << table;
  const std::string conv = line_of("aten::convolution_backward");
  EXPECT_NE(conv.find(" 0.12 "), std::string::npos) << conv;
  EXPECT_NE(conv.find("24.0 %"), std::string::npos) << conv;
  EXPECT_NE(conv.find("[autograd::engine::evaluate_function: ConvolutionBackward0] 100 %"), std::string::npos) << conv;
  // The largest self time comes first.
  EXPECT_LT(table.find("\naten::convolution_backward"), table.find("\naten::copy_")) << table;
}

// train.profile.steps: the profiled steps' op table and Chrome trace land in model_dir/profile/.
TEST(StepProfiler, TrainingWritesTheTableAndTraceOfTheProfiledSteps) {
  const fs::path dir = workdir() / "profiled";
  fs::remove_all(dir);
  detseg::train_model(make_config({"train.profile.steps=2", "train.profile.warmup=1", "train.checkpoint_every=100"}),
                      dir.string());
  const std::string table = read_text(dir / "profile" / "steps-2-3-ops.txt");
  EXPECT_EQ(table.rfind("profile of steps 2-3\n", 0), 0u) << table;
  for (const char* phase : {"detseg::wait_for_batch", "detseg::forward_and_losses", "detseg::network",
                            "detseg::targets_and_loss", "detseg::backward", "detseg::clip_and_update"})
    EXPECT_NE(table.find("\n" + std::string(phase) + " "), std::string::npos) << phase << "\n" << table;
  EXPECT_NE(table.find("aten::"), std::string::npos) << table;
  const nlohmann::json trace = nlohmann::json::parse(read_text(dir / "profile" / "steps-2-3.trace.json"));
  ASSERT_TRUE(trace.contains("traceEvents")) << trace.dump().substr(0, 300);
  bool saw_backward = false;
  for (const auto& e : trace["traceEvents"]) saw_backward |= e.value("name", "") == "detseg::backward";
  EXPECT_TRUE(saw_backward);
  // Asked for more steps than the run has left: the profile ends with the run (steps 4-4 of 4).
  const fs::path cut = workdir() / "profiled_cut";
  fs::remove_all(cut);
  detseg::train_model(make_config({"train.profile.steps=10", "train.profile.warmup=3", "train.checkpoint_every=100"}),
                      cut.string());
  EXPECT_EQ(read_text(cut / "profile" / "steps-4-4-ops.txt").rfind("profile of steps 4-4\n", 0), 0u);
}

// `detseg train --nproc N` end to end with the real binary: RetinaNet-R18 on 4 demo images at
// 128 px. Two workers x batch 1 reach the same weights as one process x batch 2; only rank 0
// writes; a 2-process run resumes in 1 process; a killed or hung worker stops the job; a NaN loss
// on one rank stops every rank. A Mask R-CNN's (bbox + segm) and a DeepLab model's final
// evaluation sharded over 2 ranks equal a 1-process one.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "detseg/core/error.h"
#include "detseg/data/readers/coco.h"
#include "detseg/train/checkpoint.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using detseg::testing::read_text;
using detseg::testing::start_background;
using detseg::testing::wait_for;
using CmdRun = detseg::testing::CommandRun;

CmdRun run(const std::string& args) {
  return detseg::testing::run_command("timeout 120 " + std::string(DETSEG_BINARY) + " --threads 1 " + args);
}

int count_lines(const fs::path& p) {
  std::string t = read_text(p);
  return static_cast<int>(std::count(t.begin(), t.end(), '\n'));
}

// 4 demo images with their annotations removed: each image's loss normaliser is then 1 (positives
// + 1) whether it is alone or in a batch, so with the reference's per-replica normalisation two
// replicas at rate 2x take exactly one process's batch-2 step (see docs/distributed.md).
const fs::path& workdir() {
  static const fs::path dir = [] {
    static const detseg::testing::TempDir d_temp("test_dist");  // for the whole program
    fs::path d = d_temp.path();
    fs::remove_all(d);
    fs::create_directories(d);
    detseg::CocoDataset all = detseg::read_coco(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json");
    detseg::CocoDataset subset;
    subset.categories = all.categories;
    for (int i = 0; i < 4; ++i) subset.images.push_back(all.images[static_cast<size_t>(i)]);
    detseg::write_coco(subset, (d / "empty4.json").string());
    for (const auto& a : all.annotations)
      for (const auto& img : subset.images)
        if (a.image_id == img.id) subset.annotations.push_back(a);
    detseg::write_coco(subset, (d / "ann4.json").string());
    std::ofstream(d / "config.yaml")
        << "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, frozen_batch_norm: true,\n"
           "        fpn_channels: 32}\n"
           "train: {batch_size: 1, num_steps: 2, seed: 5, checkpoint_every: 1000, log_every: 1,\n"
           "        optimizer: {type: sgd}, schedule: {type: constant, learning_rate: 1.0},\n"
           "        distributed: {timeout_s: 4}}\n"
           "train_input: {annotations: '" << (d / "empty4.json").string() << "', images: '"
        << DETSEG_SOURCE_DIR << "/assets/demo/images', num_workers: 1, require_boxes: false}\n"
        << "eval: {batch_size: 1}\n"
        << "eval_input: {annotations: '" << (d / "ann4.json").string() << "', images: '"
        << DETSEG_SOURCE_DIR << "/assets/demo/images', num_workers: 1}\n";
    return d;
  }();
  return dir;
}

std::string config() { return (workdir() / "config.yaml").string(); }

// The worker of `launcher` whose environment holds RANK=<rank>, or -1.
pid_t worker_pid(pid_t launcher, int rank) {
  const std::string l = std::to_string(launcher);
  std::istringstream children(read_text(fs::path("/proc") / l / "task" / l / "children"));
  pid_t pid = 0;
  while (children >> pid) {
    std::string env = read_text(fs::path("/proc") / std::to_string(pid) / "environ");
    std::istringstream vars(env);
    std::string var;
    while (std::getline(vars, var, '\0'))
      if (var == "RANK=" + std::to_string(rank)) return pid;
  }
  return -1;
}

// Starts a long --nproc 2 run, waits until rank 0 logged `steps` steps, then hands back the launcher.
pid_t start_long_run(const std::string& name, const std::string& extra, int steps = 1) {
  fs::path model = workdir() / name;
  fs::remove_all(model);
  const pid_t launcher =
      start_background(std::string(DETSEG_BINARY) + " --threads 1 train --nproc 2 --config " + config() +
                           " --model-dir " + model.string() + " --set train.num_steps=100000 " + extra,
                       workdir() / (name + ".log"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && count_lines(model / "metrics.jsonl") < steps)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return launcher;
}

}  // namespace

TEST(TrainNproc, TwoWorkersMatchOneProcessAndResumeInOne) {
  const fs::path one = workdir() / "one", two = workdir() / "two";
  fs::remove_all(one);
  fs::remove_all(two);
  // One process, batch 2, rate 0.5 vs two processes, batch 1, rate 1.0 (per-replica normaliser 1).
  CmdRun a = run("train --config " + config() + " --model-dir " + one.string() +
              " --set train.batch_size=2 --set train.schedule.learning_rate=0.5");
  ASSERT_EQ(a.code, 0) << a.output;
  CmdRun b = run("train --nproc 2 --config " + config() + " --model-dir " + two.string());
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("data-parallel: 2 processes, gloo backend"), std::string::npos) << b.output;

  detseg::Checkpoint ca = detseg::read_checkpoint((one / "ckpt-2.dsckpt").string());
  detseg::Checkpoint cb = detseg::read_checkpoint((two / "ckpt-2.dsckpt").string());
  ASSERT_EQ(ca.model.size(), cb.model.size());
  double max_diff = 0, max_change = 0;
  for (size_t k = 0; k < ca.model.size(); ++k) {
    ASSERT_EQ(ca.model[k].first, cb.model[k].first);
    max_diff = std::max(max_diff, (ca.model[k].second - cb.model[k].second).abs().max().item<double>());
  }
  // The steps moved the weights far more than the difference (so the test can fail).
  CmdRun init = run("train --config " + config() + " --model-dir " + (workdir() / "zero").string() +
                 " --set train.num_steps=1 --set train.schedule.learning_rate=1e-12");
  ASSERT_EQ(init.code, 0) << init.output;
  detseg::Checkpoint c0 = detseg::read_checkpoint((workdir() / "zero" / "ckpt-1.dsckpt").string());
  for (size_t k = 0; k < ca.model.size(); ++k)
    max_change = std::max(max_change, (ca.model[k].second - c0.model[k].second).abs().max().item<double>());
  std::printf("2 x batch 1 vs 1 x batch 2 after 2 steps: max |diff| %.3g, max |change| %.3g\n", max_diff, max_change);
  EXPECT_LT(max_diff, 1e-5) << "max change " << max_change;
  EXPECT_GT(max_change, 100 * max_diff);
  // The final evaluation, sharded over the 2 ranks and merged on rank 0, equals a 1-process
  // evaluation of the same checkpoint: the 4 images once each, same loss means and COCO stats.
  const fs::path single_eval = workdir() / "eval-two.json";
  CmdRun e = run("eval --config " + config() + " --checkpoint " + (two / "ckpt-2.dsckpt").string() + " --json " +
                 single_eval.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const nlohmann::json merged = nlohmann::json::parse(read_text(two / "eval-final.json"));
  const nlohmann::json single = nlohmann::json::parse(read_text(single_eval));
  EXPECT_EQ(merged["num_images"], 4) << merged.dump();
  EXPECT_EQ(merged["num_images"], single["num_images"]);
  for (size_t i = 0; i < 12; ++i) EXPECT_NEAR(merged["stats"][i].get<double>(), single["stats"][i].get<double>(), 1e-9);
  ASSERT_TRUE(merged["losses"].is_object()) << merged.dump();
  for (auto& [name, value] : single["losses"].items())
    EXPECT_NEAR(merged["losses"][name].get<double>(), value.get<double>(), 1e-6 * (1 + std::abs(value.get<double>())))
        << name;
  // Only rank 0 logs: one metrics line per step.
  EXPECT_EQ(count_lines(two / "metrics.jsonl"), 2);
  // Logged losses are the mean over ranks. At step 1 both runs hold the same initial weights; with
  // no objects each image's loss is normalised by 1, so the batch-2 loss is the sum of the two
  // images' losses and the 2-rank mean is half of it (rank 0's own loss is one image's).
  auto first_loss = [](const fs::path& metrics) {
    std::istringstream lines(read_text(metrics));
    std::string line;
    std::getline(lines, line);
    return nlohmann::json::parse(line)["total_loss"].get<double>();
  };
  const double one_loss = first_loss(one / "metrics.jsonl"), two_loss = first_loss(two / "metrics.jsonl");
  std::printf("step-1 total_loss: 1 x batch 2 %.6f, mean over 2 ranks %.6f\n", one_loss, two_loss);
  EXPECT_NEAR(2 * two_loss, one_loss, 1e-5 * one_loss);

  // The 2-process run (saved 2 x batch 1) resumes in one process with batch 1.
  CmdRun c = run("train --config " + config() + " --model-dir " + two.string() + " --set train.num_steps=3");
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("resumed from"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("step 2 continues at loader batch 4"), std::string::npos) << c.output;
  EXPECT_TRUE(fs::exists(two / "ckpt-3.dsckpt"));
  EXPECT_EQ(count_lines(two / "metrics.jsonl"), 3);
}

// Mask R-CNN: the final evaluation with masks (bbox and segm COCO stats, mask loss), sharded over
// the 2 ranks and merged on rank 0, equals a 1-process `detseg eval` of the same checkpoint.
TEST(TrainNproc, MaskRcnnShardedEvalMatchesOneProcess) {
  const std::string coco = std::string(DETSEG_SHARED_DIR) + "/data/coco128";
  if (!fs::exists(coco)) GTEST_SKIP() << coco << " not found: sharded mask evaluation not checked";
  const fs::path dir = workdir() / "mask";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // 4 COCO128 images at 96 px, a slim ResNet-18 FPN Mask R-CNN, 2 steps. Score threshold 0, 100
  // detections per image and class-agnostic matching, so that even this barely trained model has
  // detections overlapping the ground truth: non-zero AP and mask loss to compare.
  const std::string input = "{annotations: '" + coco + "/annotations/instances_val2017.json', images: '" + coco +
                            "/val2017', max_images: 4, num_workers: 1}";
  std::ofstream(dir / "config.yaml")
      << "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, image_size: 96, fpn_channels: 16,\n"
         "        faster_rcnn: {number_of_stages: 3, first_stage_box_predictor_depth: 16, first_stage_max_proposals: 50,\n"
         "                      second_stage_batch_size: 32, second_stage_add_groundtruth_proposals: true,\n"
         "                      representation_size: 32, mask_head_depth: 16}}\n"
         "postprocess: {score_threshold: 0.0, max_detections_per_image: 100}\n"
         "train: {batch_size: 1, num_steps: 2, seed: 5, checkpoint_every: 1000, log_every: 1,\n"
         "        optimizer: {type: adam}, schedule: {type: constant, learning_rate: 0.001},\n"
         "        distributed: {timeout_s: 30}}\n"
      << "train_input: " << input << "\neval: {batch_size: 1, class_agnostic: true}\neval_input: " << input << "\n";
  const std::string cfg = (dir / "config.yaml").string();
  CmdRun b = run("train --nproc 2 --config " + cfg + " --model-dir " + (dir / "two").string());
  ASSERT_EQ(b.code, 0) << b.output;
  const fs::path single_eval = dir / "eval-one.json";
  CmdRun e = run("eval --config " + cfg + " --checkpoint " + (dir / "two" / "ckpt-2.dsckpt").string() + " --json " +
                 single_eval.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const nlohmann::json merged = nlohmann::json::parse(read_text(dir / "two" / "eval-final.json"));
  const nlohmann::json single = nlohmann::json::parse(read_text(single_eval));
  EXPECT_EQ(merged["num_images"], 4) << merged.dump();
  EXPECT_EQ(single["num_images"], 4) << single.dump();
  ASSERT_TRUE(merged.contains("segm_stats")) << merged.dump();
  ASSERT_TRUE(single.contains("segm_stats")) << single.dump();
  for (const char* key : {"stats", "segm_stats"})
    for (size_t i = 0; i < 12; ++i)
      EXPECT_NEAR(merged[key][i].get<double>(), single[key][i].get<double>(), 1e-9) << key << "[" << i << "]";
  EXPECT_GT(single["stats"][8].get<double>(), 0) << single.dump();       // AR@100: some box found
  EXPECT_GT(single["segm_stats"][8].get<double>(), 0) << single.dump();  // ... and some mask
  ASSERT_TRUE(merged["losses"].is_object()) << merged.dump();
  // The RPN minibatch is sampled at random: equal only because each image's draws are seeded by
  // its id wherever it is evaluated.
  EXPECT_GT(single["losses"]["second_stage_mask_loss"].get<double>(), 0) << single.dump();
  for (auto& [name, value] : single["losses"].items())
    EXPECT_NEAR(merged["losses"][name].get<double>(), value.get<double>(), 1e-6 * (1 + std::abs(value.get<double>())))
        << name;
  std::printf("sharded mask eval: bbox AR@100 %.4f, segm AR@100 %.4f, mask loss %.4f\n",
              single["stats"][8].get<double>(), single["segm_stats"][8].get<double>(),
              single["losses"]["second_stage_mask_loss"].get<double>());
}

// Trainable batch norm (all ResNet stages) with train.distributed.sync_batch_norm: the 2 x batch 1
// run still equals 1 x batch 2 (weights and running statistics), through the real train loop.
TEST(TrainNproc, SyncBatchNormMatchesOneProcess) {
  const fs::path one = workdir() / "sbn-one", two = workdir() / "sbn-two";
  fs::remove_all(one);
  fs::remove_all(two);
  const std::string common = " --config " + config() +
                             " --set model.frozen_batch_norm=false --set model.trainable_backbone_stages=5"
                             " --set \"eval_input.annotations=''\"";
  CmdRun a = run("train --model-dir " + one.string() + common +
                 " --set train.batch_size=2 --set train.schedule.learning_rate=0.5");
  ASSERT_EQ(a.code, 0) << a.output;
  CmdRun b = run("train --nproc 2 --model-dir " + two.string() + common + " --set train.distributed.sync_batch_norm=true");
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("data-parallel: 20 batch-norm layers synchronised across 2 ranks"), std::string::npos)
      << b.output;
  detseg::Checkpoint ca = detseg::read_checkpoint((one / "ckpt-2.dsckpt").string());
  detseg::Checkpoint cb = detseg::read_checkpoint((two / "ckpt-2.dsckpt").string());
  ASSERT_EQ(ca.model.size(), cb.model.size());
  double max_diff = 0, max_stats_diff = 0;
  for (size_t k = 0; k < ca.model.size(); ++k) {
    if (!ca.model[k].second.is_floating_point()) continue;
    const double d = (ca.model[k].second - cb.model[k].second).abs().max().item<double>();
    max_diff = std::max(max_diff, d);
    if (ca.model[k].first.find("running_") != std::string::npos) max_stats_diff = std::max(max_stats_diff, d);
  }
  std::printf("sync batch norm, 2 x batch 1 vs 1 x batch 2: max |diff| %.3g (running stats %.3g)\n", max_diff,
              max_stats_diff);
  EXPECT_LT(max_diff, 1e-4);
}

TEST(TrainNproc, KilledWorkerStopsTheJob) {
  // A checkpoint every step, so rank 0 is often saving when the other worker dies.
  pid_t launcher = start_long_run("killed", "--set train.checkpoint_every=1 --set train.keep_checkpoints=2", 2);
  pid_t rank1 = worker_pid(launcher, 1);
  ASSERT_GT(rank1, 0) << read_text(workdir() / "killed.log");
  ::kill(rank1, SIGKILL);
  int status = wait_for(launcher, 30);
  const std::string log = read_text(workdir() / "killed.log");
  ASSERT_NE(status, -1) << "launcher did not stop within 30 s\n" << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << log;
  EXPECT_NE(log.find("worker rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"), std::string::npos)
      << log;
  EXPECT_EQ(worker_pid(launcher, 0), -1);
  // No corrupt checkpoint: every one left loads, the latest included (step 1 was saved before step
  // 2 was logged).
  detseg::CheckpointManager manager(detseg::CheckpointManagerOptions{(workdir() / "killed").string(), 2, 1});
  auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value()) << log;
  EXPECT_GE(detseg::read_checkpoint(*latest).step, 1);
  for (const auto& entry : manager.list()) EXPECT_NO_THROW(detseg::read_checkpoint(entry.path)) << entry.path;
}

TEST(TrainNproc, HungWorkerTimesOutWithAClearError) {
  pid_t launcher = start_long_run("hung", "");  // train.distributed.timeout_s: 4
  pid_t rank1 = worker_pid(launcher, 1);
  ASSERT_GT(rank1, 0) << read_text(workdir() / "hung.log");
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(rank1, SIGSTOP);
  int status = wait_for(launcher, 40);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = read_text(workdir() / "hung.log");
  ASSERT_NE(status, -1) << "launcher did not stop within 40 s\n" << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << log;
  EXPECT_NE(log.find("distributed: rank 0 of 2: all-reduce failed"), std::string::npos) << log;
  EXPECT_NE(log.find("worker rank 0"), std::string::npos) << log;
  EXPECT_LT(seconds, 25) << log;
}

TEST(TrainNproc, NonFiniteLossOnOneRankStopsEveryRankAtThatStep) {
  // Two ranks started as torchrun starts them (no launcher to kill the survivor), a collective
  // timeout far longer than the test allows, and rank 1's loss made NaN at step 3: both ranks must
  // stop at step 3 at once, rank 0 naming rank 1 and the last good checkpoint (step 2's).
  const fs::path model = workdir() / "nan";
  fs::remove_all(model);
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  pid_t ranks[2];
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    ranks[r] = start_background(
        "env RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
            " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
            " DETSEG_INJECT_NAN_LOSS=3:1 " + DETSEG_BINARY + " --threads 1 train --config " + config() +
            " --model-dir " + model.string() +
            " --set train.num_steps=6 --set train.checkpoint_every=1 --set train.distributed.timeout_s=120",
        workdir() / ("nan" + std::to_string(r) + ".log"));
  }
  int status[2];
  for (int r = 0; r < 2; ++r) status[r] = wait_for(ranks[r], 100);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log0 = read_text(workdir() / "nan0.log"), log1 = read_text(workdir() / "nan1.log");
  ASSERT_NE(status[0], -1) << "rank 0 did not stop\n" << log0;
  ASSERT_NE(status[1], -1) << "rank 1 did not stop\n" << log1;
  EXPECT_TRUE(WIFEXITED(status[0]) && WEXITSTATUS(status[0]) == 1) << log0;
  EXPECT_TRUE(WIFEXITED(status[1]) && WEXITSTATUS(status[1]) == 1) << log1;
  EXPECT_LT(seconds, 60) << "the stop waited for the collective timeout\n" << log0;
  EXPECT_NE(log1.find("loss is nan at step 3"), std::string::npos) << log1;
  const std::string good = (model / "ckpt-2.dsckpt").string();
  EXPECT_NE(log0.find("the loss of rank 1 is not finite at step 3; training stopped on every rank. The last good "
                      "checkpoint is " + good),
            std::string::npos)
      << log0;
  EXPECT_EQ(detseg::read_checkpoint(good).step, 2);
  EXPECT_FALSE(fs::exists(model / "ckpt-3.dsckpt"));
}
// ---- Sharded segmentation evaluation (DeepLab) ---------------------------------------------------
// A tiny DeepLabv3+ (MobileNetV2, output stride 16) trained 2 steps on 65 px crops of CamVid, then
// evaluated at full resolution (480x360) on 3 val frames: with 2 ranks the loader pads rank 1's
// shard with image 0 again (positions 0,2 | 1,0), which must count once. The merged evaluation
// `detseg train --nproc 2` writes equals a 1-process `detseg eval` of the same checkpoint.
namespace {

std::string seg_config() {
  const fs::path path = workdir() / "seg.yaml";
  const std::string camvid = std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid";
  auto input = [&](const std::string& split, int images) {
    return "{format: seg_folder, images: '" + camvid + "/" + split + "', annotations: '" + camvid + "/" + split +
           "annot', void_values: [11], max_images: " + std::to_string(images) + ", num_workers: 1}";
  };
  std::ofstream(path)
      << "model: {type: deeplabv3plus, num_classes: 11, backbone: mobilenet_v2, frozen_batch_norm: false,\n"
         "        deeplab: {output_stride: 16, aspp_channels: 16, decoder_channels: 16, low_level_channels: 8,\n"
         "                  image_pooling: false, crop_size: 65}}\n"
         "train: {batch_size: 1, num_steps: 2, seed: 5, checkpoint_every: 1000, log_every: 1,\n"
         "        optimizer: {type: adam}, schedule: {type: constant, learning_rate: 0.01},\n"
         "        distributed: {timeout_s: 30}}\n"
      << "train_input: " << input("train", 2) << "\n"
      << "eval: {batch_size: 1}\n"
      << "eval_input: " << input("val", 3) << "\n";
  return path.string();
}

}  // namespace

TEST(TrainNproc, ShardedSegmentationEvalEqualsOneProcess) {
  const fs::path two = workdir() / "seg-two";
  fs::remove_all(two);
  CmdRun b = run("train --nproc 2 --config " + seg_config() + " --model-dir " + two.string());
  ASSERT_EQ(b.code, 0) << b.output;
  const fs::path single_eval = workdir() / "seg-eval-one.json";
  CmdRun e = run("eval --config " + seg_config() + " --checkpoint " + (two / "ckpt-2.dsckpt").string() +
                 " --json " + single_eval.string());
  ASSERT_EQ(e.code, 0) << e.output;
  const nlohmann::json merged = nlohmann::json::parse(read_text(two / "eval-final.json"));
  const nlohmann::json single = nlohmann::json::parse(read_text(single_eval));
  std::printf("seg eval, 3 images: 2 ranks merged mIoU %.6f, pixel acc %.6f, loss %.6f; 1 process %.6f, %.6f, %.6f\n",
              merged["mIoU"].get<double>(), merged["pixel_accuracy"].get<double>(),
              merged["losses"]["total_loss"].get<double>(), single["mIoU"].get<double>(),
              single["pixel_accuracy"].get<double>(), single["losses"]["total_loss"].get<double>());
  EXPECT_EQ(merged["step"], 2);
  EXPECT_EQ(merged["num_images"], 3) << merged.dump();
  EXPECT_EQ(single["num_images"], 3) << single.dump();
  for (const char* key : {"mIoU", "pixel_accuracy", "mean_accuracy", "fwIoU"})
    EXPECT_NEAR(merged[key].get<double>(), single[key].get<double>(), 1e-12) << key;
  ASSERT_EQ(merged["per_class_iou"].size(), 11u) << merged.dump();
  for (auto& [name, iou] : single["per_class_iou"].items()) {
    ASSERT_TRUE(merged["per_class_iou"].contains(name)) << name;
    if (iou.is_null())
      EXPECT_TRUE(merged["per_class_iou"][name].is_null()) << name;
    else
      EXPECT_NEAR(merged["per_class_iou"][name].get<double>(), iou.get<double>(), 1e-12) << name;
  }
  // Counting the repeated image twice would move the loss means: they are per image, not per batch.
  ASSERT_TRUE(merged["losses"].is_object() && !merged["losses"].empty()) << merged.dump();
  ASSERT_EQ(merged["losses"].size(), single["losses"].size());
  for (auto& [name, value] : single["losses"].items())
    EXPECT_NEAR(merged["losses"][name].get<double>(), value.get<double>(), 1e-6 * (1 + std::abs(value.get<double>())))
        << name;
}
// ---- end of sharded segmentation evaluation -------------------------------------------------------

namespace {

// Starts a long single-process run on `model` and waits until it logged `steps` steps.
pid_t start_single_run(const fs::path& model, const std::string& log_name, int steps, const std::string& extra = "") {
  fs::remove_all(model);
  const pid_t pid = start_background(std::string(DETSEG_BINARY) + " --threads 1 train --config " + config() +
                                         " --model-dir " + model.string() + " --set train.num_steps=100000 " + extra,
                                     workdir() / log_name);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && count_lines(model / "metrics.jsonl") < steps)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return pid;
}

}  // namespace

TEST(TrainStop, SecondTrainerRefusesAndSigintSavesACheckpointThatResumes) {
  const fs::path model = workdir() / "sigint";
  const pid_t first = start_single_run(model, "sigint.log", 2);
  ASSERT_GE(count_lines(model / "metrics.jsonl"), 2) << read_text(workdir() / "sigint.log");

  // A second trainer on the busy dir refuses at once, naming the holder, and writes nothing.
  const std::string pipeline_before = read_text(model / "pipeline.yaml");
  CmdRun second = run("train --config " + config() + " --model-dir " + model.string() + " --set train.num_steps=7");
  EXPECT_EQ(second.code, 1) << second.output;
  EXPECT_NE(second.output.find("detseg: error: " + model.string() + " is in use by another detseg train (pid " +
                               std::to_string(first) + ")"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(read_text(model / "pipeline.yaml"), pipeline_before);

  // SIGINT: the step in flight finishes, a checkpoint of it is written, exit 130 with how to resume.
  ::kill(first, SIGINT);
  const int status = wait_for(first, 60);
  const std::string log = read_text(workdir() / "sigint.log");
  ASSERT_NE(status, -1) << "no stop within 60 s after SIGINT\n" << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << log;
  detseg::CheckpointManager manager(detseg::CheckpointManagerOptions{model.string(), 5, 1000});
  const auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value()) << log;
  const int64_t step = detseg::read_checkpoint(*latest).step;
  EXPECT_GE(step, 2);
  EXPECT_EQ(count_lines(model / "metrics.jsonl"), step) << "every step done is logged, none is lost";
  EXPECT_NE(log.find("detseg: training stopped by SIGINT after step " + std::to_string(step) + "; checkpoint " +
                     *latest + " saved. Run the same command again to resume"),
            std::string::npos)
      << log;

  // The lock went with the process: the same command resumes from that checkpoint.
  CmdRun resumed =
      run("train --config " + config() + " --model-dir " + model.string() + " --set train.num_steps=" + std::to_string(step + 1));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + *latest + " at step " + std::to_string(step)), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("trained to step " + std::to_string(step + 1)), std::string::npos) << resumed.output;
}

TEST(TrainStop, SecondSigintStopsAtOnceWithoutSaving) {
  const fs::path model = workdir() / "sigint2";
  // Steps of ~2 s at 1024 px, so both signals land within one step (the first one then only
  // marks the stop); 30 ms apart, because signals sent back to back merge into one pending signal.
  const pid_t pid = start_single_run(model, "sigint2.log", 1, "--set model.image_size=1024");
  ::kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ::kill(pid, SIGINT);
  const int status = wait_for(pid, 30);
  const std::string log = read_text(workdir() / "sigint2.log");
  ASSERT_NE(status, -1) << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << log;
  EXPECT_NE(log.find("second interrupt, stopping now without saving"), std::string::npos) << log;
}

TEST(TrainStop, KilledTrainerBlocksNothingAndItsTempFilesGo) {
  const fs::path model = workdir() / "kill9";
  const pid_t pid = start_single_run(model, "kill9.log", 1);
  ::kill(pid, SIGKILL);
  ASSERT_NE(wait_for(pid, 30), -1);
  // What a checkpoint write cut short by kill -9 leaves: a temp file named after the dead writer.
  const fs::path leftover = model / ("ckpt-1.dsckpt.tmp." + std::to_string(pid));
  std::ofstream(leftover) << "half a checkpoint";
  CmdRun again = run("train --config " + config() + " --model-dir " + model.string() + " --set train.num_steps=2");
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_FALSE(fs::exists(leftover));
}

TEST(TrainStop, SigtermToTheLauncherStopsEveryRankWithACheckpoint) {
  const pid_t launcher = start_long_run("sigterm", "", 2);
  ::kill(launcher, SIGTERM);
  const int status = wait_for(launcher, 60);
  const std::string log = read_text(workdir() / "sigterm.log");
  ASSERT_NE(status, -1) << "no stop within 60 s after SIGTERM\n" << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << log;
  EXPECT_EQ(log.find("stopping the other"), std::string::npos) << "a stop is not a worker failure\n" << log;
  detseg::CheckpointManager manager(detseg::CheckpointManagerOptions{(workdir() / "sigterm").string(), 5, 1000});
  const auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value()) << log;
  EXPECT_NE(log.find("training stopped by SIGTERM after step " + std::to_string(detseg::read_checkpoint(*latest).step)),
            std::string::npos)
      << log;
}

// The GPU's way of reading (DETSEG_LAZY_HOST_READS=1: losses read only every 5th step here), so the
// signal most likely lands between two reads: the ranks' stop vote still ends the run after the
// step in flight, the health of the unread steps is read before the checkpoint, and the
// checkpoint of that step is written with finite weights.
TEST(TrainStop, SigtermBetweenReadsSavesTheStepInFlight) {
  const fs::path model = workdir() / "sigterm_lazy";
  fs::remove_all(model);
  const pid_t pid = start_background("env DETSEG_LAZY_HOST_READS=1 " + std::string(DETSEG_BINARY) +
                                         " --threads 1 train --config " + config() + " --model-dir " + model.string() +
                                         " --set train.num_steps=100000 --set train.log_every=5",
                                     workdir() / "sigterm_lazy.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && count_lines(model / "metrics.jsonl") < 1)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(pid, SIGTERM);
  const int status = wait_for(pid, 60);
  const std::string log = read_text(workdir() / "sigterm_lazy.log");
  ASSERT_NE(status, -1) << "no stop within 60 s after SIGTERM\n" << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << log;
  detseg::CheckpointManager manager(detseg::CheckpointManagerOptions{model.string(), 5, 1000});
  const auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value()) << log;
  const detseg::Checkpoint saved = detseg::read_checkpoint(*latest);
  EXPECT_GE(saved.step, 5);
  EXPECT_NE(log.find("training stopped by SIGTERM after step " + std::to_string(saved.step) + "; checkpoint " + *latest),
            std::string::npos)
      << log;
  for (const auto& [name, t] : saved.model)
    if (t.is_floating_point()) {
      EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << name;
    }
}

TEST(TrainStop, ContinuousEvaluationStopsOnSigint) {
  const fs::path empty = workdir() / "no_checkpoints";
  fs::create_directories(empty);
  const pid_t pid = start_background(std::string(DETSEG_BINARY) + " --threads 1 eval --config " + config() +
                                         " --continuous --checkpoint-dir " + empty.string() + " --wait-interval 600",
                                     workdir() / "eval_sigint.log");
  // Wait until the process catches SIGINT (its SigCgt mask in /proc has bit 2), i.e. the engine is
  // loaded and watching; before that SIGINT would simply kill it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto catches_sigint = [&] {
    std::istringstream status(read_text(fs::path("/proc") / std::to_string(pid) / "status"));
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGINT - 1))) != 0;
    return false;
  };
  while (std::chrono::steady_clock::now() < deadline && !catches_sigint())
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the watcher's loop
  ::kill(pid, SIGINT);
  const int status = wait_for(pid, 20);
  const std::string log = read_text(workdir() / "eval_sigint.log");
  ASSERT_NE(status, -1) << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << log;
  EXPECT_NE(log.find("detseg: continuous evaluation stopped by SIGINT"), std::string::npos) << log;
}

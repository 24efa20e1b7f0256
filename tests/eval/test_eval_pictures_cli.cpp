// The evaluation pictures through the real binary: `detseg train`'s final-step evaluation and
// `detseg eval` write them into the model dir's eval/pictures-<step>/ with the numbers the
// evaluation prints (the --json file), TensorBoard's event file holds a PR curve per class that
// tensorboard's own reader parses, and eval.pictures: false turns it all off; predict's
// --draw-threshold changes the pictures, not the detections file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "command_runner.h"
#include "detseg/core/files.h"
#include "detseg/data/image_codec.h"
#include "detseg/data/readers/coco.h"
#include "peer_python.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using detseg::testing::CommandRun;
using detseg::testing::run_command;

namespace {

const std::string kImages = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";

// A tiny RetinaNet (128 px) on 4 demo images, evaluated on 3 others; scores of a barely trained
// model are low, so postprocess keeps nearly everything.
fs::path write_config(const fs::path& dir) {
  const detseg::CocoDataset all = detseg::read_coco(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/train.json");
  auto subset = [&](size_t first, size_t count, const fs::path& out) {
    detseg::CocoDataset s;
    s.categories = all.categories;
    for (size_t i = first; i < first + count; ++i) s.images.push_back(all.images[i]);
    for (const auto& a : all.annotations)
      for (const auto& img : s.images)
        if (a.image_id == img.id) s.annotations.push_back(a);
    detseg::write_coco(s, out.string());
  };
  subset(0, 4, dir / "train.json");
  subset(4, 3, dir / "eval.json");
  const fs::path config = dir / "tiny.yaml";
  std::ofstream(config) << "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, fpn_channels: 32}\n"
                           "postprocess: {score_threshold: 0.001, max_detections_per_image: 100}\n"
                           "train: {batch_size: 2, num_steps: 2, seed: 3, checkpoint_every: 2, log_every: 1}\n"
                           "train_input: {annotations: "
                        << (dir / "train.json") << ", images: " << kImages
                        << ", num_workers: 1}\n"
                           "eval: {batch_size: 3, every_steps: 2}\n"
                           "eval_input: {annotations: "
                        << (dir / "eval.json") << ", images: " << kImages << ", num_workers: 1}\n";
  return config;
}

std::string events_text(const fs::path& eval_dir) {
  std::string all;
  for (const auto& e : fs::directory_iterator(eval_dir))
    if (e.path().filename().string().find("tfevents") != std::string::npos) all += detseg::read_file(e.path().string());
  return all;
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(detseg::read_file(path.string())); }

}  // namespace

TEST(EvalPicturesCli, TrainAndEvalWriteThePicturesWithThePrintedNumbers) {
  const detseg::testing::TempDir temp("eval_pictures_cli");
  const fs::path config = write_config(temp.path());
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 2 ";
  const fs::path model = temp / "model";
  CommandRun r = run_command(bin + "train --config " + config.string() + " --model-dir " + model.string());
  ASSERT_EQ(r.code, 0) << r.output;
  // Training's evaluations at its final step (every_steps 2 = num_steps, and the final one) drew
  // the pictures.
  const fs::path pictures = model / "eval" / "pictures-2";
  EXPECT_NE(r.output.find("evaluation pictures written to " + pictures.string() + "/"), std::string::npos) << r.output;
  for (const char* name : {"pr_curves_iou50.png", "pr_curves_iou50-95.png", "pr_curves.json", "confusion_matrix.png",
                           "confusion_matrix.json", "ap_by_size.png", "ap_by_size.json", "gallery.json"})
    EXPECT_TRUE(fs::exists(pictures / name)) << name << "\n" << r.output;
  // The final weights are evaluated once: the loop's evaluation of the last step is per class and
  // is the final report, so eval/eval-2.json and eval-final.json hold the same report.
  const nlohmann::json final_report = read_json(model / "eval-final.json");
  EXPECT_TRUE(final_report.contains("per_category_ap")) << final_report.dump();
  EXPECT_EQ(read_json(model / "eval" / "eval-2.json"), final_report);
  // TensorBoard: one PR curve per class next to the scalars.
  const std::string events = events_text(model / "eval");
  for (const char* tag : {"pr_iou50/RBC", "pr_iou50/WBC", "pr_iou50/Platelets", "pr_curves"})
    EXPECT_NE(events.find(tag), std::string::npos) << tag;

  // `detseg eval` writes them again, with the numbers of its --json.
  fs::remove_all(pictures);
  const fs::path json_path = temp / "eval.json.out";
  r = run_command(bin + "eval --config " + config.string() + " --model-dir " + model.string() + " --json " +
                  json_path.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("evaluation pictures (9 files) written to " + pictures.string()), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("AP by object size"), std::string::npos) << r.output;
  const nlohmann::json printed = read_json(json_path);
  // ...and it equals `detseg eval` of the final checkpoint.
  for (size_t i = 0; i < 12; ++i)
    EXPECT_NEAR(final_report["stats"][i].get<double>(), printed["stats"][i].get<double>(), 1e-9) << i;
  const nlohmann::json curves = read_json(pictures / "pr_curves.json");
  ASSERT_EQ(curves["classes"].size(), 3u);
  for (const auto& c : curves["classes"]) {
    const std::string name = c["name"];
    EXPECT_EQ(c["ap"], printed["per_category_ap"][name]) << name;
    EXPECT_EQ(c["ap50"], printed["per_category_ap50"][name]) << name;
    EXPECT_EQ(c["precision50"].size(), c["ap"].get<double>() > -1 ? 101u : 0u);
  }
  EXPECT_EQ(read_json(pictures / "ap_by_size.json")["classes"], printed["per_category_ap_by_size"]);
  // The confusion matrix's columns count each class's objects in the evaluation file.
  const detseg::CocoDataset truth = detseg::read_coco((temp / "eval.json").string());
  const nlohmann::json matrix = read_json(pictures / "confusion_matrix.json");
  ASSERT_EQ(matrix["names"].size(), 4u);
  EXPECT_EQ(matrix["names"][3], "background");
  for (size_t col = 0; col < 3; ++col) {
    int64_t column = 0, objects = 0;
    for (size_t row = 0; row < 4; ++row) column += matrix["matrix"][row][col].get<int64_t>();
    for (const auto& a : truth.annotations)
      objects += truth.categories[static_cast<size_t>(truth.category_index.at(a.category_id))].name == matrix["names"][col];
    EXPECT_EQ(column, objects) << matrix["names"][col];
    EXPECT_EQ(curves["classes"][col]["num_truth"].get<int64_t>(), objects) << matrix["names"][col];
  }
  EXPECT_EQ(matrix["matrix"][3][3], 0);
  const nlohmann::json gallery = read_json(pictures / "gallery.json");
  EXPECT_GE(gallery["images"].size(), 1u);
  EXPECT_LE(gallery["images"].size(), 3u);
  EXPECT_TRUE(fs::exists(pictures / "gallery.png"));

  // TensorBoard's own PR-curves plugin, through the data provider `tensorboard --logdir` serves it
  // from, lists the curves training wrote and gives each one's data (what its dashboard draws).
  const fs::path script = temp / "tags.py";
  std::ofstream(script)
      << "import sys\n"
         "from tensorboard import context\n"
         "from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer as pem\n"
         "from tensorboard.plugins import base_plugin\n"
         "from tensorboard.plugins.pr_curve import pr_curves_plugin\n"
         "m = pem.EventMultiplexer()\n"
         "m.AddRunsFromDirectory(sys.argv[1])\n"
         "m.Reload()\n"
         "plugin = pr_curves_plugin.PrCurvesPlugin(base_plugin.TBContext(\n"
         "    data_provider=data_provider.MultiplexerDataProvider(m, sys.argv[1]), logdir=sys.argv[1]))\n"
         "ctx = context.RequestContext()\n"
         "for run, tags in sorted(plugin.tags_impl(ctx, '').items()):\n"
         "    for tag in sorted(tags):\n"
         "        e = plugin.pr_curves_impl(ctx, '', [run], tag)[run][-1]\n"
         "        print(tag, e['step'], tags[tag]['displayName'], '|', e['true_positives'][0] + e['false_negatives'][0])\n";
  if (fs::exists(detseg::test::kPeerPython) &&
      std::system((detseg::test::kPeerPython + " -c 'import tensorboard' >/dev/null 2>&1").c_str()) == 0) {
    const CommandRun tb = run_command(detseg::test::kPeerPython + " " + script.string() + " " + (model / "eval").string());
    ASSERT_EQ(tb.code, 0) << tb.output;
    // Each class: its tag at step 2, its display name, and tp + fn at threshold 0 = its objects
    // among the evaluated images (every class of the 3 images has some).
    for (const auto& c : curves["classes"]) {
      const std::string name = c["name"];
      const std::string line = "pr_iou50/" + name + " 2 " + name + " (IoU 0.5) | " + std::to_string(c["num_truth"].get<int64_t>());
      EXPECT_NE(tb.output.find(line + "\n"), std::string::npos) << line << "\n" << tb.output;
    }
  } else {
    std::printf("no tensorboard in %s: its reader was not run (scripts/setup.sh --peers)\n",
                detseg::test::kPeerPython.c_str());
  }

  // eval.pictures: false: no pictures.
  fs::remove_all(pictures);
  r = run_command(bin + "eval --config " + config.string() + " --model-dir " + model.string() +
                  " --set eval.pictures=false");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(pictures)) << r.output;
  EXPECT_EQ(r.output.find("evaluation pictures"), std::string::npos) << r.output;
}

TEST(EvalPicturesCli, DrawThresholdChangesThePictureNotTheDetections) {
  const detseg::testing::TempDir temp("draw_threshold_cli");
  const fs::path config = write_config(temp.path());
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 2 ";
  const fs::path model = temp / "model";
  CommandRun r = run_command(bin + "train --config " + config.string() + " --model-dir " + model.string());
  ASSERT_EQ(r.code, 0) << r.output;
  fs::create_directories(temp / "in");
  fs::copy_file(kImages + "/BloodImage_00000.jpg", temp / "in" / "a.jpg");
  auto predict = [&](const std::string& flag, const std::string& out) {
    const CommandRun p = run_command(bin + "predict --config " + config.string() + " --checkpoint " +
                                     (model / "ckpt-2.dsckpt").string() + " --input " + (temp / "in").string() +
                                     " --output " + (temp / out).string() + " " + flag);
    EXPECT_EQ(p.code, 0) << p.output;
    return read_json(temp / out / "detections.json");
  };
  const nlohmann::json all = predict("--draw-threshold 0", "all");
  const nlohmann::json none = predict("--draw-threshold 1", "none");
  const nlohmann::json old_name = predict("--score-threshold 1", "old");
  // postprocess.score_threshold 0.001 keeps many detections; the drawing threshold removes none.
  ASSERT_GT(all.size(), 5u);
  EXPECT_EQ(all, none);
  EXPECT_EQ(all, old_name);
  // A barely trained model scores below 1: at 1 nothing is drawn, the picture is the photo.
  for (const auto& d : all) ASSERT_LT(d["score"].get<double>(), 1.0);
  const cv::Mat photo = detseg::read_image_bgr((temp / "in" / "a.jpg").string());
  const cv::Mat drawn_none = detseg::read_image_bgr((temp / "none" / "a.jpg.png").string());
  const cv::Mat drawn_all = detseg::read_image_bgr((temp / "all" / "a.jpg.png").string());
  ASSERT_EQ(drawn_none.size(), photo.size());
  EXPECT_EQ(cv::norm(drawn_none, photo, cv::NORM_INF), 0);
  EXPECT_EQ(cv::norm(detseg::read_image_bgr((temp / "old" / "a.jpg.png").string()), photo, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(drawn_all, photo, cv::NORM_INF), 0);
  // Both names at once: refused.
  r = run_command(bin + "predict --config " + config.string() + " --checkpoint " + (model / "ckpt-2.dsckpt").string() +
                  " --input " + (temp / "in").string() + " --output " + (temp / "both").string() +
                  " --draw-threshold 0.5 --score-threshold 0.5");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_command(bin + "predict --checkpoint c --input i --output o --draw-threshold 1.5");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output, "detseg: error: --draw-threshold: expected a number in [0, 1], got \"1.5\"; see `detseg predict "
                      "--help`\n");
}

TEST(EvalPicturesCli, NoPicturesNorCurvesWhenTurnedOff) {
  const detseg::testing::TempDir temp("eval_pictures_cli_off");
  const fs::path config = write_config(temp.path());
  const fs::path model = temp / "model";
  const CommandRun r = run_command(std::string(DETSEG_BINARY) + " --threads 2 train --config " + config.string() +
                                   " --model-dir " + model.string() + " --set eval.pictures=false");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(model / "eval" / "pictures-2"));
  EXPECT_EQ(r.output.find("evaluation pictures"), std::string::npos) << r.output;
  const std::string events = events_text(model / "eval");
  EXPECT_NE(events.find("AP50"), std::string::npos);  // the scalars are there
  EXPECT_EQ(events.find("pr_curves"), std::string::npos);
}

TEST(EvalPicturesCli, SegmentationEvalWritesThePixelConfusionMatrix) {
  const std::string camvid = std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid";
  if (!fs::exists(camvid + "/val")) GTEST_SKIP() << camvid << " is not here";
  const detseg::testing::TempDir temp("eval_pictures_cli_seg");
  const std::string input = "{format: seg_folder, images: '" + camvid + "/val', annotations: '" + camvid +
                            "/valannot', void_values: [11], max_images: 2, num_workers: 0}";
  const fs::path config = temp / "seg.yaml";
  std::ofstream(config) << "model: {type: deeplabv3plus, num_classes: 11, backbone: resnet18, frozen_batch_norm: false,\n"
                           "        deeplab: {aspp_channels: 16, decoder_channels: 16, low_level_channels: 8, crop_size: 96}}\n"
                           "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1, optimizer: {type: adam}}\n"
                           "train_input: " << input << "\neval_input: " << input << "\n";
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 2 ";
  const fs::path model = temp / "model";
  CommandRun r = run_command(bin + "train --config " + config.string() + " --model-dir " + model.string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_command(bin + "eval --config " + config.string() + " --model-dir " + model.string() + " --json " +
                  (temp / "eval.json").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path pictures = model / "eval" / "pictures-1";
  EXPECT_TRUE(fs::exists(pictures / "pixel_confusion_matrix.png")) << r.output;
  const nlohmann::json matrix = read_json(pictures / "pixel_confusion_matrix.json");
  const nlohmann::json printed = read_json(temp / "eval.json");
  ASSERT_EQ(matrix["names"].size(), 11u);
  // The diagonal of the column-normalised matrix is each class's accuracy: its mean over the
  // classes present is the printed mean accuracy.
  double sum = 0;
  int present = 0;
  for (size_t k = 0; k < 11; ++k)
    if (!matrix["normalized"][k][k].is_null()) {
      sum += matrix["normalized"][k][k].get<double>();
      ++present;
    }
  ASSERT_GT(present, 0);
  EXPECT_NEAR(sum / present, printed["mean_accuracy"].get<double>(), 1e-12);
}

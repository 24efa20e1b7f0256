// The evaluation pictures through the real binary: `detseg train`'s final-step evaluation and
// `detseg eval` write them into the model dir's eval/pictures-<step>/ with the numbers the
// evaluation prints (the --json file), TensorBoard's event file holds a PR curve per class that
// tensorboard's own reader parses, and eval.pictures: false turns it all off.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "command_runner.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/coco.h"
#include "peer_python.h"
#include "temp_dir.h"

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
  // Training's evaluation at its final step (every_steps 2 = num_steps) drew the pictures.
  const fs::path pictures = model / "eval" / "pictures-2";
  for (const char* name : {"pr_curves_iou50.png", "pr_curves_iou50-95.png", "pr_curves.json", "confusion_matrix.png",
                           "confusion_matrix.json", "ap_by_size.png", "ap_by_size.json", "gallery.json"})
    EXPECT_TRUE(fs::exists(pictures / name)) << name << "\n" << r.output;
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
  }
  EXPECT_EQ(matrix["matrix"][3][3], 0);
  const nlohmann::json gallery = read_json(pictures / "gallery.json");
  EXPECT_GE(gallery["images"].size(), 1u);
  EXPECT_LE(gallery["images"].size(), 3u);
  EXPECT_TRUE(fs::exists(pictures / "gallery.png"));

  // TensorBoard's own reader parses the curves training wrote.
  const fs::path script = temp / "tags.py";
  std::ofstream(script) << "import sys\n"
                           "from tensorboard.backend.event_processing import event_accumulator as ea\n"
                           "acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.TENSORS: 0})\n"
                           "acc.Reload()\n"
                           "for tag in sorted(acc.PluginTagToContent('pr_curves')):\n"
                           "    print(tag, acc.Tensors(tag)[0].step, [d.size for d in acc.Tensors(tag)[0].tensor_proto.tensor_shape.dim])\n";
  if (fs::exists(detseg::test::kPeerPython) &&
      std::system((detseg::test::kPeerPython + " -c 'import tensorboard' >/dev/null 2>&1").c_str()) == 0) {
    const CommandRun tb = run_command(detseg::test::kPeerPython + " " + script.string() + " " + (model / "eval").string());
    ASSERT_EQ(tb.code, 0) << tb.output;
    for (const char* name : {"Platelets", "RBC", "WBC"})
      EXPECT_NE(tb.output.find(std::string("pr_iou50/") + name + " 2 [6, 101]"), std::string::npos)
          << tb.output;
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

TEST(EvalPicturesCli, NoPicturesNorCurvesWhenTurnedOff) {
  const detseg::testing::TempDir temp("eval_pictures_cli_off");
  const fs::path config = write_config(temp.path());
  const fs::path model = temp / "model";
  const CommandRun r = run_command(std::string(DETSEG_BINARY) + " --threads 2 train --config " + config.string() +
                                   " --model-dir " + model.string() + " --set eval.pictures=false");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(model / "eval" / "pictures-2"));
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

// The installable library: `cmake --install` of this build into a scratch prefix, examples/detect
// configured with find_package(detseg) against that prefix alone (LibTorch found through the
// package's own hint), built, and run on a BCCD image with an exported model and with a checkpoint
// plus its config. Its detections must be `detseg predict`'s for the same image.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "command_runner.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

struct Printed {
  std::string name;
  double score, x1, y1, x2, y2;
};

std::vector<Printed> parse_example_output(const std::string& text) {
  std::vector<Printed> out;
  std::istringstream lines(text);
  Printed p;
  while (lines >> p.name >> p.score >> p.x1 >> p.y1 >> p.x2 >> p.y2) out.push_back(p);
  return out;
}

}  // namespace

TEST(Install, ExampleBuiltAgainstTheInstalledPackageDetectsWhatPredictDoes) {
  const fs::path build = fs::path(DETSEG_BINARY).parent_path();
  const fs::path dir = fs::temp_directory_path() / ("detseg_test_install_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  using detseg::testing::run_command;

  auto install = run_command("cmake --install " + build.string() + " --prefix " + (dir / "prefix").string());
  ASSERT_EQ(install.code, 0) << install.output;
  for (const char* f : {"bin/detseg", "bin/detseg-engine", "lib/libdetseg.a", "include/detseg/api/inference.h",
                        "lib/cmake/detseg/detsegConfig.cmake", "lib/cmake/detseg/detsegTargets.cmake"})
    EXPECT_TRUE(fs::exists(dir / "prefix" / f)) << f;
  // Only the prefix: no source tree include path, no Torch_DIR (the package supplies both).
  auto configure = run_command("cmake -S " + std::string(DETSEG_SOURCE_DIR) + "/examples/detect -B " + (dir / "example").string() +
                               " -G Ninja -DCMAKE_PREFIX_PATH=" + (dir / "prefix").string());
  ASSERT_EQ(configure.code, 0) << configure.output;
  auto compile = run_command("cmake --build " + (dir / "example").string());
  ASSERT_EQ(compile.code, 0) << compile.output;

  // A model: one training step of a small RetinaNet on the demo set, and its TorchScript export.
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  std::ofstream(dir / "config.yaml")
      << "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, image_size: 128}\n"
         "postprocess: {score_threshold: 0.0}\n"  // a 1-step model's scores are all low
         "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1}\n"
         "train_input: {annotations: " << demo << "/train.json, images: " << demo << "/images, max_images: 2, "
         "num_workers: 0}\n";
  const std::string detseg_bin = (dir / "prefix" / "bin" / "detseg").string() + " --threads 2 ";
  const std::string config = (dir / "config.yaml").string(), ckpt = (dir / "model" / "ckpt-1.dsckpt").string();
  auto train = run_command(detseg_bin + "train --config " + config + " --model-dir " + (dir / "model").string());
  ASSERT_EQ(train.code, 0) << train.output;
  auto exp = run_command(detseg_bin + "export --config " + config + " --checkpoint " + ckpt +
                         " --format torchscript -o " + (dir / "model.pt").string());
  ASSERT_EQ(exp.code, 0) << exp.output;

  const std::string image = demo + "/images/BloodImage_00000.jpg";
  const std::string example = (dir / "example" / "detect").string();
  fs::create_directories(dir / "one");
  fs::copy_file(image, dir / "one" / "BloodImage_00000.jpg");
  // Each way of loading against `detseg predict` loading the same way (the exported graph and the
  // checkpoint's network round differently, which can swap near-equal detections at the top-100 cut).
  const std::string exported_args = (dir / "model.pt").string() + " " + image + " '' 0";
  const std::string checkpoint_args = ckpt + " " + image + " " + config + " 0";
  for (const auto& [args, predict_args] : std::vector<std::pair<std::string, std::string>>{
           {exported_args, "--checkpoint " + (dir / "model.pt").string()},
           {checkpoint_args, "--checkpoint " + ckpt + " --config " + config}}) {
    fs::remove_all(dir / "predicted");
    auto predict = run_command(detseg_bin + "predict " + predict_args + " --input " + (dir / "one").string() +
                               " --output " + (dir / "predicted").string());
    ASSERT_EQ(predict.code, 0) << predict.output;
    const auto expected = nlohmann::json::parse(std::ifstream(dir / "predicted" / "detections.json"));
    ASSERT_FALSE(expected.empty());
    auto run = run_command(example + " " + args);
    ASSERT_EQ(run.code, 0) << args << "\n" << run.output;
    const std::vector<Printed> got = parse_example_output(run.output);
    ASSERT_EQ(got.size(), expected.size()) << args << "\n" << run.output;
    // The same detections (a 1-step model's near-equal scores may list in another order).
    std::vector<bool> used(expected.size(), false);
    for (size_t i = 0; i < got.size(); ++i) {
      bool found = false;
      for (size_t j = 0; j < expected.size() && !found; ++j) {
        const auto& e = expected[j];
        const auto& b = e["bbox"];  // COCO xywh
        if (!used[j] && got[i].name == e["category_name"].get<std::string>() &&
            std::abs(got[i].score - e["score"].get<double>()) < 1e-3 && std::abs(got[i].x1 - b[0].get<double>()) < 0.15 &&
            std::abs(got[i].y1 - b[1].get<double>()) < 0.15 &&
            std::abs(got[i].x2 - b[0].get<double>() - b[2].get<double>()) < 0.15 &&
            std::abs(got[i].y2 - b[1].get<double>() - b[3].get<double>()) < 0.15)
          used[j] = found = true;
      }
      EXPECT_TRUE(found) << args << ": detection " << i << " (" << got[i].name << " " << got[i].score << " " << got[i].x1
                         << " " << got[i].y1 << ") is not among predict's";
    }
  }
  // Errors come back as one line, not a crash.
  auto missing = run_command(example + " " + ckpt + " " + image);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.output.find("a checkpoint needs its config"), std::string::npos) << missing.output;
  fs::remove_all(dir);
}

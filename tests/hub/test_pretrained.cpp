// model.pretrained end to end: torchvision-named weights (tests/fixtures/torchvision_state_dict.py,
// random tensors in torchvision's layout) load into every model type's backbone with nothing
// missing or mismatched; `detseg train` of the example config fetches them from a loopback server
// and its checkpoint holds them; `detseg fetch` prints the cached path; config and fetch mistakes
// are one-line errors with exit code 2 or 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "command_runner.h"
#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/hub/sha256.h"
#include "detseg/models/build.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/fine_tune.h"
#include "peer_python.h"
#include "range_server.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using detseg::testing::run_command;

namespace {

const fs::path& workdir() {
  static const fs::path dir = [] {
    static const detseg::testing::TempDir d_temp("test_pretrained");  // for the whole program
    fs::path d = d_temp.path();
    fs::remove_all(d);
    fs::create_directories(d / "weights");
    return d;
  }();
  return dir;
}

// torchvision-named random weights of `arch`; "" without torchvision. Every architecture the
// tests use is made in one Python call, once per run.
std::string torchvision_weights(const std::string& arch) {
  static const std::unordered_map<std::string, std::string> made = [] {
    std::unordered_map<std::string, std::string> paths;
    if (!detseg::test::torchvision_available()) return paths;
    const auto r = run_command(detseg::test::kPeerPython + " " + DETSEG_SOURCE_DIR +
                               "/tests/fixtures/torchvision_state_dict.py " + (workdir() / "weights").string() +
                               " resnet18 resnet50 mobilenet_v2 efficientnet_b0 efficientnet_b1 efficientnet_b2");
    EXPECT_EQ(r.code, 0) << r.output;
    std::istringstream lines(r.output);  // "ARCH PATH" lines, among whatever Python warned
    for (std::string line; std::getline(lines, line);) {
      const size_t space = line.find(' ');
      if (space != std::string::npos && line.size() > 4 && line.compare(line.size() - 4, 4, ".pth") == 0 &&
          line.find(' ', space + 1) == std::string::npos)
        paths[line.substr(0, space)] = line.substr(space + 1);
    }
    return paths;
  }();
  auto it = made.find(arch);
  return it == made.end() ? "" : it->second;
}

std::unordered_map<std::string, at::Tensor> by_name(const detseg::NamedTensors& tensors) {
  std::unordered_map<std::string, at::Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t;
  return out;
}

}  // namespace

// For each meta-architecture, the torchvision network its backbone mirrors.
TEST(Pretrained, TorchvisionWeightsFillEveryBackboneTensor) {
  struct Case {
    const char* model;
    const char* arch;
    const char* prefix;  // our names = prefix + torchvision's
  };
  const Case cases[] = {
      {"{type: retinanet, backbone: resnet18}", "resnet18", "backbone.body."},
      {"{type: faster_rcnn, backbone: resnet18}", "resnet18", "backbone.body."},
      {"{type: mask_rcnn, backbone: resnet18, faster_rcnn: {feature_extractor: c4, first_stage_anchor_sizes: [256]}}", "resnet18", "backbone.body."},
      {"{type: deeplabv3plus, backbone: resnet18, frozen_batch_norm: false}", "resnet18", "backbone."},
      {"{type: deeplabv3, backbone: mobilenet_v2}", "mobilenet_v2", "backbone."},
      {"{type: deeplabv3, backbone: resnet50}", "resnet50", "backbone."},
      {"{type: efficientdet, efficientdet: d0}", "efficientnet_b0", "backbone."},
      {"{type: efficientdet, efficientdet: d1, image_size: 640}", "efficientnet_b1", "backbone."},
      {"{type: efficientdet, efficientdet: d2, image_size: 768}", "efficientnet_b2", "backbone."},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const std::string file = torchvision_weights(c.arch);
    if (file.empty()) GTEST_SKIP() << "torchvision is not installed in " << detseg::test::kPeerPython;
    const std::string section = std::string(c.model).insert(1, "num_classes: 3, pretrained: '" + file + "', ");
    auto config = detseg::parse_config("model: " + section + "\n", (workdir() / "x.yaml").string());
    auto model = detseg::build_model(config);
    const auto summary = detseg::fine_tune_from_checkpoint(*model, detseg::pretrained_fine_tune_options(config, file));
    EXPECT_TRUE(summary.skipped.empty()) << summary.to_string();
    EXPECT_TRUE(summary.mismatched.empty()) << summary.to_string();
    const auto theirs = by_name(detseg::read_weights_file(file));
    size_t backbone_tensors = 0;
    for (const auto& [name, t] : detseg::module_state(*model)) {
      if (name.rfind(c.prefix, 0) != 0) continue;
      ++backbone_tensors;
      const std::string tv_name = name.substr(std::string(c.prefix).size());
      ASSERT_TRUE(theirs.count(tv_name)) << name;
      EXPECT_TRUE(t.equal(theirs.at(tv_name).to(t.dtype()))) << name;
    }
    EXPECT_EQ(summary.loaded.size(), backbone_tensors);
    EXPECT_GT(backbone_tensors, 50u);
  }
}

TEST(Pretrained, WeightsForAnotherBackboneFailNamingWhatIsMissing) {
  const std::string file = torchvision_weights("resnet18");
  if (file.empty()) GTEST_SKIP() << "torchvision is not installed in " << detseg::test::kPeerPython;
  auto config = detseg::parse_config("model: {num_classes: 3, backbone: resnet50, pretrained: " + file + "}\n",
                                     (workdir() / "x.yaml").string());
  auto model = detseg::build_model(config);
  try {
    detseg::fine_tune_from_checkpoint(*model, detseg::pretrained_fine_tune_options(config, file));
    FAIL() << "no error";
  } catch (const detseg::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.rfind(file + ": fine-tune checkpoint lacks ", 0), 0u) << what;
  }
}

// The example config, served over loopback: one training step with the backbone frozen keeps
// it as loaded, so the checkpoint's backbone must equal the file's tensors exactly.
TEST(Pretrained, TrainFetchesAndLoadsTheExampleConfigsWeights) {
  const std::string file = torchvision_weights("resnet18");
  if (file.empty()) GTEST_SKIP() << "torchvision is not installed in " << detseg::test::kPeerPython;
  const fs::path home = workdir() / "home", model_dir = workdir() / "run";
  fs::remove_all(home);
  fs::remove_all(model_dir);
  detseg::test::RangeServer server(workdir() / "weights", workdir() / "server");
  const std::string name = fs::path(file).filename().string();
  const std::string url = server.url("range", name);
  const std::string config = std::string(DETSEG_SOURCE_DIR) + "/configs/demo/retinanet_r18_bccd_pretrained.yaml";
  const std::string train = "DETSEG_HOME=" + home.string() + " " + DETSEG_BINARY + " --threads 2 train --config " +
                            config + " --model-dir " + model_dir.string() + " --set model.pretrained=" + url +
                            " --set model.image_size=128 --set model.fpn_channels=32 --set train.num_steps=1"
                            " --set train.batch_size=1 --set 'train.freeze_pattern=^backbone\\.body\\.'"
                            " --set train_input.max_images=1"
                            " --set eval_input.max_images=1 --set train_input.num_workers=0"
                            " --set eval_input.num_workers=0";
  const auto r = run_command(train);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string cached = (home / "weights" / name).string();
  // ResNet-18: 20 convolutions and 20 frozen batch norms of 4 tensors (no num_batches_tracked).
  EXPECT_NE(r.output.find("pretrained backbone from " + cached + ":\nfine-tune: loaded 100, skipped 0, shape "
                          "mismatches 0, outside the restored scope "),
            std::string::npos)
      << r.output;
  EXPECT_EQ(detseg::sha256_file(cached), detseg::sha256_file(file));
  const auto theirs = by_name(detseg::read_weights_file(file));
  const detseg::Checkpoint ckpt = detseg::read_checkpoint((model_dir / "ckpt-1.dsckpt").string());
  size_t compared = 0;
  for (const auto& [ours, t] : ckpt.model) {
    if (ours.rfind("backbone.body.", 0) != 0) continue;
    const std::string tv_name = ours.substr(14);
    ASSERT_TRUE(theirs.count(tv_name)) << ours;
    EXPECT_TRUE(t.equal(theirs.at(tv_name).to(t.dtype()))) << ours;
    ++compared;
  }
  EXPECT_EQ(compared, 100u);
  // The checkpoint now rules: a second run resumes from it and never asks for the weights.
  server.stop();
  const auto again = run_command(train + " --set train.num_steps=1");
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(again.output.find("pretrained backbone"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("model.pretrained"), std::string::npos) << again.output;
}

// A missing file stops training before any step with one line; train.fine_tune.checkpoint takes
// precedence over model.pretrained, which is then not even fetched (here: nothing listens there).
TEST(Pretrained, MissingWeightsAndPrecedenceOfTheFineTuneCheckpoint) {
  const std::string file = torchvision_weights("resnet18");
  if (file.empty()) GTEST_SKIP() << "torchvision is not installed in " << detseg::test::kPeerPython;
  const fs::path model_dir = workdir() / "run_precedence";
  fs::remove_all(model_dir);
  const std::string train = std::string(DETSEG_BINARY) + " --threads 2 train --config " + DETSEG_SOURCE_DIR +
                            "/configs/demo/retinanet_r18_bccd_pretrained.yaml --model-dir " + model_dir.string() +
                            " --set model.image_size=128 --set model.fpn_channels=32 --set train.num_steps=1"
                            " --set train.batch_size=1 --set train_input.max_images=1 --set eval_input.max_images=1"
                            " --set train_input.num_workers=0 --set eval_input.num_workers=0";
  auto r = run_command(train + " --set model.pretrained=/nonexistent/resnet18.pth");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("\ndetseg: error: model.pretrained: /nonexistent/resnet18.pth: file not found\n"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(model_dir / "ckpt-1.dsckpt"));
  r = run_command(train + " --set model.pretrained=http://127.0.0.1:1/resnet18-f37072fd.pth" +
                  " --set train.fine_tune.checkpoint=" + file + " --set train.fine_tune.type=classification" +
                  " --set 'train.fine_tune.scope_map=[\"backbone.body.=\"]'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("fine-tune: loaded 100, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.pretrained not used: train.fine_tune.checkpoint initialises the model"),
            std::string::npos)
      << r.output;
}

TEST(Pretrained, FetchCommandPrintsTheCachedPath) {
  const fs::path home = workdir() / "fetch_home", root = workdir() / "fetch_root";
  fs::remove_all(home);
  fs::create_directories(root);
  const std::string data(100000, 'w');
  const std::string digest = detseg::sha256_hex(data);
  const std::string name = "w-" + digest.substr(0, 8) + ".pth";
  std::ofstream(root / name, std::ios::binary) << data;
  detseg::test::RangeServer server(root, workdir() / "fetch_server");
  const std::string env = "DETSEG_HOME=" + home.string() + " ";
  const std::string fetch = env + DETSEG_BINARY + " fetch ";
  const std::string quiet_fetch = env + DETSEG_BINARY + " -q fetch ";
  const std::string cached = (home / "weights" / name).string();
  auto r = run_command(fetch + server.url("cut", name));  // resumed within the call
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1), cached + "\n") << r.output;
  EXPECT_EQ(detseg::testing::read_text(cached), data);
  // Through a config's model.pretrained, --set overriding the example's URL.
  r = run_command(quiet_fetch + "--config " + DETSEG_SOURCE_DIR + "/configs/demo/retinanet_r18_bccd_pretrained.yaml" +
                  " --set model.pretrained=" + server.url("range", name));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, cached + "\n");
  r = run_command(fetch + server.url("range", name) + " --sha256 0badc0de");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find("detseg: error:")),
            "detseg: error: fetch: " + server.url("range", name) + ": sha256 mismatch: expected 0badc0de, got " +
                digest + " (the download was deleted)\n");
  r = run_command(fetch + server.url("range", "nothing.pth") + " --sha256 0badc0de");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("detseg: error: fetch: " + server.url("range", "nothing.pth") + ": HTTP 404 Not Found\n"),
            std::string::npos)
      << r.output;
  r = run_command(fetch + "http://127.0.0.1/weights.pth");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("detseg: error: fetch: --sha256: required for http://127.0.0.1/weights.pth"),
            std::string::npos)
      << r.output;
  r = run_command(fetch);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("detseg: error: fetch: give a URL (or path) or --config, one of the two"), std::string::npos)
      << r.output;
  // The front runs fetch itself: no engine needed.
  r = run_command("DETSEG_ENGINE=/nonexistent " + quiet_fetch + server.url("range", name));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, cached + "\n");
}

// `detseg export --format safetensors`: the file holds exactly the checkpoint's weights, and
// torchvision 0.26's RetinaNet loads it with load_state_dict(strict=True) and computes the same
// head outputs as detseg's network (1e-4). Python is a test-time peer only: that half is skipped
// with a message where the venv's torchvision is absent.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "command_runner.h"
#include "detseg/core/files.h"
#include "detseg/io/safetensors.h"
#include "detseg/io/state_dict.h"
#include "detseg/models/retinanet_network.h"
#include "detseg/train/checkpoint.h"
#include "peer_python.h"

namespace fs = std::filesystem;

TEST(Export, SafetensorsLoadsStrictlyIntoTorchvisionRetinaNet) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_test_export_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  // torchvision's RetinaNet layout: ResNet-18 with frozen batch norm, FPN 256 with P6/P7.
  std::ofstream(dir / "config.yaml")
      << "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, frozen_batch_norm: true}\n"
         "train: {batch_size: 1, num_steps: 1, checkpoint_every: 1}\n"
         "train_input: {annotations: " << demo << "/train.json, images: " << demo << "/images, max_images: 2, "
         "num_workers: 1}\n";
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 1 ";
  auto train = detseg::testing::run_command(bin + "train --config " + (dir / "config.yaml").string() + " --model-dir " +
                                            (dir / "model").string());
  ASSERT_EQ(train.code, 0) << train.output;
  const fs::path ckpt = dir / "model" / "ckpt-1.dsckpt", out = dir / "retinanet.safetensors";
  auto exp = detseg::testing::run_command(bin + "export --config " + (dir / "config.yaml").string() + " --checkpoint " +
                                          ckpt.string() + " --format safetensors -o " + out.string());
  ASSERT_EQ(exp.code, 0) << exp.output;
  EXPECT_NE(exp.output.find("exported step 1 of " + ckpt.string()), std::string::npos) << exp.output;

  // The file is the checkpoint's model state, name for name and value for value.
  std::map<std::string, std::string> metadata;
  const detseg::NamedTensors exported = detseg::read_safetensors(out.string(), &metadata);
  const detseg::Checkpoint checkpoint = detseg::read_checkpoint(ckpt.string());
  ASSERT_EQ(exported.size(), checkpoint.model.size());
  for (size_t i = 0; i < exported.size(); ++i) {
    EXPECT_EQ(exported[i].first, checkpoint.model[i].first);
    EXPECT_TRUE(at::equal(exported[i].second, checkpoint.model[i].second)) << exported[i].first;
  }
  EXPECT_EQ(metadata["format"], "pt");
  EXPECT_EQ(metadata["detseg.model"], "retinanet");
  EXPECT_EQ(metadata["detseg.class_names"], "[\"RBC\",\"WBC\",\"Platelets\"]");  // the demo label map order

  if (!detseg::test::torchvision_available()) GTEST_SKIP() << DETSEG_PYTHON " with torchvision not found: strict load not checked";
  const std::string cmd = DETSEG_PYTHON " " DETSEG_SOURCE_DIR "/tests/fixtures/check_safetensors_export.py " +
                          out.string() + " " + dir.string() + " 18 3 120 150";
  auto peer = detseg::testing::run_command(cmd);
  ASSERT_EQ(peer.code, 0) << cmd << "\n" << peer.output;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  EXPECT_EQ(io.at("num_tensors").toTensor().item<int64_t>(), static_cast<int64_t>(exported.size()));
  // detseg's network with the exported weights, on the same input.
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(3).depth(18));
  detseg::StateDict dict;
  for (const auto& [name, tensor] : exported) dict[name] = tensor;
  const auto report = detseg::load_state_dict(*net, dict);
  EXPECT_TRUE(report.complete()) << report.summary();
  net->eval();
  at::NoGradGuard no_grad;
  const auto ours = net->forward(io.at("input").toTensor());
  const at::Tensor cls = io.at("cls_logits").toTensor(), box = io.at("box_regression").toTensor();
  ASSERT_EQ(ours.cls_logits.sizes(), cls.sizes());
  EXPECT_LT((ours.cls_logits - cls).abs().max().item<float>(), 1e-4);
  EXPECT_LT((ours.box_regression - box).abs().max().item<float>(), 1e-4);
  fs::remove_all(dir);
}

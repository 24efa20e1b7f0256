// Tests: our RetinaNet network against torchvision 0.14's: a state dict saved by
// tests/fixtures/make_retinanet_parity.py loads key for key, parameter counts agree, and class
// logits / box regressions agree to 1e-4. Python is a test-time peer only: the test is skipped
// with a message where the venv python (DETSEG_PYTHON) with torchvision is absent.
#include <gtest/gtest.h>

#include "peer_python.h"
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <filesystem>

#include "detseg/core/files.h"
#include "detseg/io/state_dict.h"
#include "detseg/models/retinanet_network.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

using detseg::test::torchvision_available;

TEST(RetinaNetParity, MatchesTorchvisionResNet18) {
  if (!torchvision_available()) {
    GTEST_SKIP() << DETSEG_PYTHON << " with torchvision not found: RetinaNet parity not checked";
  }
  const detseg::testing::TempDir dir_temp("retinanet_parity");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  const std::string cmd = std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/make_retinanet_parity.py " + dir.string() + " 18 190 250";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  const int64_t num_classes = io.at("num_classes").toTensor().item<int64_t>();

  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(num_classes).depth(18));
  const auto report = detseg::load_state_dict(*net, detseg::read_state_dict((dir / "state_dict.pt").string()));
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_GT(report.loaded.size(), 100u);

  int64_t params = 0;
  for (auto& p : net->parameters()) params += p.numel();
  EXPECT_EQ(params, io.at("num_params").toTensor().item<int64_t>());

  net->eval();
  at::NoGradGuard g;
  auto out = net->forward(io.at("input").toTensor());
  const at::Tensor cls = io.at("cls_logits").toTensor(), box = io.at("box_regression").toTensor();
  ASSERT_EQ(out.cls_logits.sizes(), cls.sizes());
  ASSERT_EQ(out.box_regression.sizes(), box.sizes());
  EXPECT_LT((out.cls_logits - cls).abs().max().item<float>(), 1e-4);
  EXPECT_LT((out.box_regression - box).abs().max().item<float>(), 1e-4);
  EXPECT_EQ(out.strides, (std::vector<int64_t>{8, 16, 32, 64, 128}));
  fs::remove_all(dir);
}

TEST(RetinaNet, OutputShapesAndPriorBias) {
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(4).depth(18));
  net->eval();
  at::NoGradGuard g;
  auto out = net->forward(at::randn({1, 3, 64, 96}));
  const int64_t cells = 8 * 12 + 4 * 6 + 2 * 3 + 1 * 2 + 1 * 1;
  EXPECT_EQ(out.cls_logits.sizes(), (std::vector<int64_t>{1, cells * 9, 4}));
  EXPECT_EQ(out.box_regression.sizes(), (std::vector<int64_t>{1, cells * 9, 4}));
  EXPECT_NEAR(net->named_parameters()["head.classification_head.cls_logits.bias"][0].item<float>(), -std::log(99.0),
              1e-5);
}

}  // namespace

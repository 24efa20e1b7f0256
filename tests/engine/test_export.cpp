// `detseg export`. safetensors: the file holds exactly the checkpoint's weights, and
// torchvision 0.26's RetinaNet loads it with load_state_dict(strict=True) and computes the same
// head outputs as detseg's network (1e-4). Python is a test-time peer only: that half is skipped
// with a message where the venv's torchvision is absent. TorchScript and ONNX: the traced graph, run
// by torch::jit::load here and by torch.jit.load and onnxruntime in the venv, computes what detseg's
// network computes (1e-4 and 1e-3), and `predict` runs it without the config.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "detseg/config/config.h"
#include "detseg/core/files.h"
#include "detseg/engine/evaluate.h"
#include "detseg/engine/export.h"
#include "detseg/models/build.h"
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

// ---- TorchScript and ONNX: the traced network, checked against detseg's own on one input.

namespace {

struct TracedCase {
  const char* name;
  std::string config;  // YAML
};

std::string demo_input() {
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  return "{annotations: " + demo + "/train.json, images: " + demo + "/images, max_images: 2, num_workers: 0}";
}

std::string camvid_input() {
  const std::string camvid = std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid";
  return "{format: seg_folder, images: '" + camvid + "/val', annotations: '" + camvid +
         "/valannot', void_values: [11], max_images: 2, num_workers: 0}";
}

// max |got - want| / max(1, max |want|): absolute for outputs of order 1, relative beyond, since
// float32 sums taken in another order (oneDNN's blocked kernels here, the plain conv traced) differ
// by a few ulps of the largest value (a 1-step DeepLab's logits reach ~1e3).
float scaled_difference(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<float>() / std::max(1.0f, want.abs().max().item<float>());
}

const std::string kOneStep = "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1, optimizer: {type: adam}}\n";

std::vector<TracedCase> traced_cases() {
  return {
      {"retinanet_keep_aspect_group_norm",
       "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, head_norm: group_norm,\n"
       "        resizer: keep_aspect, min_dimension: 96, max_dimension: 128}\n" + kOneStep +
           "train_input: " + demo_input() + "\neval_input: " + demo_input() + "\n"},
      {"efficientdet_d0",
       "model: {type: efficientdet, efficientdet: d0, num_classes: 3, image_size: 128}\n" + kOneStep +
           "train_input: " + demo_input() + "\neval_input: " + demo_input() + "\n"},
      {"deeplabv3plus",
       "model: {type: deeplabv3plus, num_classes: 11, backbone: resnet18, frozen_batch_norm: false,\n"
       "        deeplab: {aspp_channels: 16, decoder_channels: 16, low_level_channels: 8, crop_size: 96}}\n" +
           kOneStep + "train_input: " + camvid_input() + "\neval_input: " + camvid_input() + "\n"},
  };
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Trains one step of `yaml` in `dir` (dir/model/ckpt-1.dsckpt) and returns the config path.
std::string train_one_step(const fs::path& dir, const std::string& yaml) {
  std::ofstream(dir / "config.yaml") << yaml;
  auto train = detseg::testing::run_command(std::string(DETSEG_BINARY) + " --threads 2 train --config " +
                                            (dir / "config.yaml").string() + " --model-dir " + (dir / "model").string());
  EXPECT_EQ(train.code, 0) << train.output;
  return (dir / "config.yaml").string();
}

detseg::testing::CommandRun export_as(const std::string& config, const fs::path& dir, const std::string& format,
                                         const std::string& out, const std::string& extra = "") {
  return detseg::testing::run_command(std::string(DETSEG_BINARY) + " export --config " + config + " --checkpoint " +
                                      (dir / "model" / "ckpt-1.dsckpt").string() + " --format " + format + " -o " +
                                      out + " --device cpu " + extra);
}

}  // namespace

class TracedExport : public ::testing::TestWithParam<TracedCase> {};

TEST_P(TracedExport, TorchScriptAndOnnxComputeWhatDetsegsNetworkDoes) {
  const TracedCase& c = GetParam();
  const fs::path dir = fresh_dir(std::string("export_") + c.name);
  const std::string config_path = train_one_step(dir, c.config);
  const std::string pt = (dir / "model.pt").string(), onnx = (dir / "model.onnx").string();
  auto ts = export_as(config_path, dir, "torchscript", pt);
  ASSERT_EQ(ts.code, 0) << ts.output;
  EXPECT_NE(ts.output.find("exported step 1"), std::string::npos) << ts.output;

  const detseg::ExportedModelInfo info = detseg::read_exported_model_info(pt);
  EXPECT_EQ(info.step, 1);
  const detseg::PipelineConfig config = detseg::load_config(config_path);
  EXPECT_EQ(info.config.model.type, config.model.type);
  const bool segmenter = detseg::is_segmentation_model(config);
  // Defaults: keep_aspect's max_dimension (a multiple of 32), image_size, the crop size.
  const int64_t side = segmenter ? 96 : 128;
  EXPECT_EQ(info.height, side);
  EXPECT_EQ(info.width, side);

  // detseg's network with the checkpoint's weights, and the same model running the exported graph
  // through torch::jit::load, on one input.
  at::NoGradGuard no_grad;
  int64_t step = 0;
  std::shared_ptr<detseg::ModelImpl> native =
      segmenter ? std::static_pointer_cast<detseg::ModelImpl>(detseg::load_segmenter(config, (dir / "model" / "ckpt-1.dsckpt").string(), &step))
                : std::static_pointer_cast<detseg::ModelImpl>(detseg::load_detector(config, (dir / "model" / "ckpt-1.dsckpt").string(), &step));
  std::vector<std::string> names = native->network_output_names();
  std::vector<at::Tensor> expected = native->network_outputs(at::randn({1, 3, side, side}, at::Generator(at::detail::createCPUGenerator(7))));
  for (auto& [name, tensor] : native->network_constants(side, side, at::kCPU)) {
    names.push_back(name);
    expected.push_back(tensor);
  }
  EXPECT_EQ(info.outputs, names);
  std::shared_ptr<detseg::ModelImpl> loaded = segmenter
      ? std::static_pointer_cast<detseg::ModelImpl>(detseg::build_segmenter(info.config))
      : std::static_pointer_cast<detseg::ModelImpl>(detseg::build_detector(info.config));
  loaded->eval();
  detseg::use_exported_network(*loaded, pt, at::kCPU);
  const std::vector<at::Tensor> got =
      loaded->network_outputs(at::randn({1, 3, side, side}, at::Generator(at::detail::createCPUGenerator(7))));
  ASSERT_EQ(got.size(), native->network_output_names().size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), expected[i].sizes()) << names[i];
    EXPECT_LT(scaled_difference(got[i], expected[i]), 1e-4) << names[i];
  }

  if (!detseg::test::onnx_available()) GTEST_SKIP() << DETSEG_PYTHON " with torch, onnx and onnxruntime not found: the Python side is not checked";
  auto on = export_as(config_path, dir, "onnx", onnx);
  ASSERT_EQ(on.code, 0) << on.output;
  const std::string cmd = DETSEG_PYTHON " " DETSEG_SOURCE_DIR "/tests/fixtures/check_traced_export.py " + pt + " " + onnx +
                          " " + dir.string();
  auto peer = detseg::testing::run_command(cmd);
  ASSERT_EQ(peer.code, 0) << cmd << "\n" << peer.output;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  EXPECT_GE(io.at("opset").toTensor().item<int64_t>(), 17);
  const std::vector<at::Tensor> ours = native->network_outputs(io.at("input").toTensor());
  for (size_t i = 0; i < names.size(); ++i) {
    const at::Tensor mine = i < ours.size() ? ours[i] : expected[i];
    const at::Tensor ts_out = io.at("ts_" + names[i]).toTensor(), onnx_out = io.at("onnx_" + names[i]).toTensor();
    ASSERT_EQ(ts_out.sizes(), mine.sizes()) << names[i];
    ASSERT_EQ(onnx_out.sizes(), mine.sizes()) << names[i];
    EXPECT_LT(scaled_difference(ts_out, mine), 1e-4) << "torch.jit.load: " << names[i];
    EXPECT_LT(scaled_difference(onnx_out, mine), 1e-3) << "onnxruntime: " << names[i];
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, TracedExport, ::testing::ValuesIn(traced_cases()),
                         [](const ::testing::TestParamInfo<TracedCase>& i) { return std::string(i.param.name); });

TEST(Export, PredictRunsAnExportedModelWithoutItsConfigAndFindsTheSameDetections) {
  const fs::path dir = fresh_dir("export_predict");
  const std::string config = train_one_step(
      dir, "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, image_size: 128}\n"
           "postprocess: {score_threshold: 0.0}\n" + kOneStep + "train_input: " + demo_input() + "\n");
  auto ts = export_as(config, dir, "torchscript", (dir / "model.pt").string());
  ASSERT_EQ(ts.code, 0) << ts.output;
  const std::string images = std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images";
  const std::string bin = std::string(DETSEG_BINARY) + " --threads 2 predict --input " + images;
  auto native = detseg::testing::run_command(bin + " --config " + config + " --checkpoint " +
                                             (dir / "model" / "ckpt-1.dsckpt").string() + " --output " + (dir / "native").string());
  ASSERT_EQ(native.code, 0) << native.output;
  auto exported = detseg::testing::run_command(bin + " --checkpoint " + (dir / "model.pt").string() + " --output " +
                                               (dir / "exported").string());
  ASSERT_EQ(exported.code, 0) << exported.output;
  const auto a = nlohmann::json::parse(detseg::read_file((dir / "native" / "detections.json").string()));
  const auto b = nlohmann::json::parse(detseg::read_file((dir / "exported" / "detections.json").string()));
  ASSERT_GT(a.size(), 10u);  // score threshold 0: every image has its 100 detections
  ASSERT_EQ(a.size(), b.size());
  // The same detections; near-equal scores of a 1-step model may come out in another order.
  std::vector<bool> used(b.size(), false);
  for (size_t i = 0; i < a.size(); ++i) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (used[j] || a[i]["file_name"] != b[j]["file_name"] || a[i]["category_name"] != b[j]["category_name"] ||
          std::abs(a[i]["score"].get<double>() - b[j]["score"].get<double>()) > 1e-4)
        continue;
      bool same_box = true;
      for (int k = 0; k < 4; ++k) same_box &= std::abs(a[i]["bbox"][k].get<double>() - b[j]["bbox"][k].get<double>()) < 1e-2;
      if (same_box) used[j] = found = true;
    }
    EXPECT_TRUE(found) << "native detection " << i << " " << a[i].dump() << " not among the exported model's";
  }
  fs::remove_all(dir);
}

TEST(Export, RefusesWhatItCannotTraceWithOneLineAndNoFile) {
  const fs::path dir = fresh_dir("export_refused");
  const std::string config = train_one_step(
      dir, "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, image_size: 128}\n" + kOneStep +
               "train_input: " + demo_input() + "\n");
  // A fixed-size model traced at another size.
  auto wrong = export_as(config, dir, "torchscript", (dir / "m.pt").string(), "--height 96 --width 96");
  EXPECT_NE(wrong.code, 0);
  EXPECT_NE(wrong.output.find("takes 128x128 images (model.image_size), not 96x96"), std::string::npos) << wrong.output;
  EXPECT_FALSE(fs::exists(dir / "m.pt"));
  // Faster R-CNN's graph has NMS between its stages: refused, pointing at safetensors.
  auto frcnn = export_as(config, dir, "onnx", (dir / "m.onnx").string(), "--set model.type=faster_rcnn");
  EXPECT_NE(frcnn.code, 0);
  EXPECT_NE(frcnn.output.find("faster_rcnn cannot be traced yet"), std::string::npos) << frcnn.output;
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  // A Python without torch for the ONNX step: says what to install.
  auto no_python = detseg::testing::run_command("DETSEG_PYTHON=/nonexistent/python " + std::string(DETSEG_BINARY) +
                                                " export --config " + config + " --checkpoint " +
                                                (dir / "model" / "ckpt-1.dsckpt").string() + " --format onnx -o " +
                                                (dir / "m.onnx").string());
  EXPECT_NE(no_python.code, 0);
  EXPECT_NE(no_python.output.find("set DETSEG_PYTHON to a Python with torch and onnx"), std::string::npos) << no_python.output;
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);  // config.yaml, model/
  // An exported graph run with the config of another model.type: refused, not run as garbage.
  ASSERT_EQ(export_as(config, dir, "torchscript", (dir / "m.pt").string()).code, 0);
  auto mismatch = detseg::testing::run_command(std::string(DETSEG_BINARY) + " predict --checkpoint " +
                                               (dir / "m.pt").string() + " --config " + config +
                                               " --set model.type=faster_rcnn --input " + DETSEG_SOURCE_DIR +
                                               "/assets/demo/images --output " + (dir / "p").string());
  EXPECT_NE(mismatch.code, 0);
  EXPECT_NE(mismatch.output.find("m.pt: the exported graph's outputs (cls_logits, box_regression, anchors) are not "
                                 "what this config's model takes (it cannot run an exported graph)"),
            std::string::npos) << mismatch.output;
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  auto eval = detseg::testing::run_command(std::string(DETSEG_BINARY) + " eval --config " + config + " --checkpoint " +
                                           (dir / "m.pt").string() + " --set eval_input.annotations=" + demo +
                                           "/val.json --set eval_input.images=" + demo + "/images");
  EXPECT_NE(eval.code, 0);
  EXPECT_NE(eval.output.find("m.pt: eval takes a training checkpoint; an exported model runs with `detseg predict`"),
            std::string::npos) << eval.output;
  fs::remove_all(dir);
}

// `detseg export`. TorchScript and ONNX: the traced graphs (two-stage detectors: one per stage),
// run by torch::jit::load here and by torch.jit.load and onnxruntime in the venv, compute what
// detseg's network computes (1e-4 and 1e-3), and `predict` runs them without the config and finds
// the checkpoint's detections. safetensors: the file holds exactly the checkpoint's weights, and
// torchvision 0.26's RetinaNet, Mask R-CNN and DeepLabv3 load it with load_state_dict(strict=True)
// and compute what detseg's model does (1e-4). Python is a test-time peer only: those halves are
// skipped with a message where the venv's torch, onnx, onnxruntime or torchvision is absent.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/import.h>
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
#include "detseg/train/fine_tune.h"
#include "peer_python.h"
#include "test_paths.h"

namespace fs = std::filesystem;

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

std::string coco128_input() {
  const std::string coco = std::string(DETSEG_SHARED_DIR) + "/data/coco128";
  return "{annotations: " + coco + "/annotations/instances_val2017.json, images: " + coco +
         "/val2017, max_images: 2, num_workers: 0}";
}

std::vector<TracedCase> traced_cases() {
  const std::string two_stage = "representation_size: 32, first_stage_box_predictor_depth: 16, mask_head_depth: 8, "
                                "first_stage_max_proposals: 50, second_stage_batch_size: 16";
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
      {"faster_rcnn_fpn_keep_aspect",
       "model: {type: faster_rcnn, num_classes: 3, backbone: resnet18, fpn_channels: 16, resizer: keep_aspect,\n"
       "        min_dimension: 96, max_dimension: 128, faster_rcnn: {" + two_stage + "}}\n" + kOneStep +
           "train_input: " + demo_input() + "\neval_input: " + demo_input() + "\n"},
      {"mask_rcnn_fpn_3_stages",
       "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, fpn_channels: 16, image_size: 128,\n"
       "        faster_rcnn: {number_of_stages: 3, " + two_stage + "}}\n" + kOneStep +
           "train_input: " + coco128_input() + "\neval_input: " + coco128_input() + "\n"},
      {"mask_rcnn_c4",
       "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, image_size: 128,\n"
       "        faster_rcnn: {feature_extractor: c4, first_stage_anchor_sizes: [64], " + two_stage + "}}\n" +
           kOneStep + "train_input: " + coco128_input() + "\neval_input: " + coco128_input() + "\n"},
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
  // Two-stage detectors: each later graph is a method of the file that computes what the model's
  // own layers do, on 5 regions (it was traced with 3: the region count is free).
  torch::jit::Module module = torch::jit::load(pt);
  const std::vector<at::Tensor> forward_outputs = native->network_outputs(at::randn({1, 3, side, side}));
  std::vector<std::string> graph_names;
  for (const auto& graph : native->network_graphs()) {
    graph_names.push_back(graph.name);
    std::vector<at::Tensor> in = native->network_graph_example(graph.name, forward_outputs);
    for (at::Tensor& t : in) t = at::cat({t, t.slice(0, 0, 2) * 0.5});
    const std::vector<at::Tensor> want = native->run_network_graph(graph.name, in);
    const c10::IValue out = module.get_method(graph.name)(std::vector<c10::IValue>(in.begin(), in.end()));
    const auto& elements = out.toTupleRef().elements();
    ASSERT_EQ(elements.size(), graph.output_names.size()) << graph.name;
    for (size_t i = 0; i < elements.size(); ++i) {
      ASSERT_EQ(elements[i].toTensor().sizes(), want[i].sizes()) << graph.name << " " << graph.output_names[i];
      EXPECT_EQ(want[i].size(0), 5);
      EXPECT_LT(scaled_difference(elements[i].toTensor(), want[i]), 1e-4) << graph.name << " " << graph.output_names[i];
    }
  }
  const bool two_stage = config.model.type == "faster_rcnn" || config.model.type == "mask_rcnn";
  EXPECT_EQ(graph_names.size(), two_stage ? (config.model.type == "mask_rcnn" ? 2u : 1u) : 0u);

  if (!detseg::test::onnx_available()) GTEST_SKIP() << DETSEG_PYTHON << " with torch, onnx and onnxruntime not found: the Python side is not checked";
  auto on = export_as(config_path, dir, "onnx", onnx);
  ASSERT_EQ(on.code, 0) << on.output;
  const std::string cmd = std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/check_traced_export.py " + pt + " " + onnx +
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
  for (const auto& graph : native->network_graphs()) {
    std::vector<at::Tensor> in;
    for (const std::string& input : graph.input_names) in.push_back(io.at("in_" + graph.name + "_" + input).toTensor());
    const std::vector<at::Tensor> want = native->run_network_graph(graph.name, in);
    for (size_t i = 0; i < graph.output_names.size(); ++i) {
      const std::string key = graph.name + "_" + graph.output_names[i];
      const at::Tensor ts_out = io.at("ts_" + key).toTensor(), onnx_out = io.at("onnx_" + key).toTensor();
      ASSERT_EQ(ts_out.sizes(), want[i].sizes()) << key;
      ASSERT_EQ(onnx_out.sizes(), want[i].sizes()) << key;
      EXPECT_EQ(want[i].size(0), 5) << key;
      EXPECT_LT(scaled_difference(ts_out, want[i]), 1e-4) << "torch.jit.load: " << key;
      EXPECT_LT(scaled_difference(onnx_out, want[i]), 1e-3) << "onnxruntime: " << key;
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, TracedExport, ::testing::ValuesIn(traced_cases()),
                         [](const ::testing::TestParamInfo<TracedCase>& i) { return std::string(i.param.name); });

// ---- safetensors: the checkpoint's weights under torchvision's names.

struct SafetensorsCase {
  const char* name;  // also the architecture check_safetensors_export.py builds
  std::string config;
  std::string peer_args;  // depth, num_classes, input height and width
};

std::vector<SafetensorsCase> safetensors_cases() {
  const std::string one_step = "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1, schedule: {learning_rate: 0.001}}\n";
  return {
      // torchvision's RetinaNet layout: ResNet-18 with frozen batch norm, FPN 256 with P6/P7.
      {"retinanet", "model: {type: retinanet, num_classes: 3, backbone: resnet18, image_size: 128, frozen_batch_norm: true}\n" +
                        one_step + "train_input: " + demo_input() + "\n", "18 3 120 150"},
      // fasterrcnn_resnet50_fpn's and maskrcnn_resnet50_fpn's layouts at depth 18: FPN 256, RPN conv
      // 256, TwoMLPHead 1024, mask head 256.
      {"faster_rcnn", "model: {type: faster_rcnn, num_classes: 3, backbone: resnet18, image_size: 128}\n" + one_step +
                          "train_input: " + demo_input() + "\n", "18 3 128 160"},
      {"mask_rcnn", "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, image_size: 128}\n" + one_step +
                        "train_input: " + coco128_input() + "\n", "18 80 128 160"},
      // deeplabv3_resnet50: output stride 8 (ASPP rates 12, 24, 36), DeepLabHead's 3x3 conv, batch
      // norm throughout (the ASPP's pooled branch trains on batches of 3+).
      {"deeplabv3", "model: {type: deeplabv3, num_classes: 11, backbone: resnet50, frozen_batch_norm: false,\n"
                    "        deeplab: {output_stride: 8, head_conv: true, crop_size: 64}}\n"
                    "train: {batch_size: 3, num_steps: 1, checkpoint_every: 1, schedule: {learning_rate: 0.001}}\n"
                    "train_input: {format: seg_folder, images: '" + std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid/val', "
                    "annotations: '" + std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid/valannot', void_values: [11], "
                    "max_images: 3, num_workers: 0}\n", "50 11 96 96"},
  };
}

class SafetensorsExport : public ::testing::TestWithParam<SafetensorsCase> {};

TEST_P(SafetensorsExport, LoadsStrictlyIntoTorchvisionAndComputesWhatDetsegDoes) {
  const SafetensorsCase& c = GetParam();
  const fs::path dir = fresh_dir(std::string("safetensors_") + c.name);
  const std::string config_path = train_one_step(dir, c.config);
  const fs::path ckpt = dir / "model" / "ckpt-1.dsckpt", out = dir / "model.safetensors";
  auto exp = export_as(config_path, dir, "safetensors", out.string());
  ASSERT_EQ(exp.code, 0) << exp.output;
  EXPECT_NE(exp.output.find("exported step 1 of " + ckpt.string()), std::string::npos) << exp.output;

  // The file is the checkpoint's model state, value for value, under torchvision's names.
  std::map<std::string, std::string> metadata;
  const detseg::NamedTensors exported = detseg::read_safetensors(out.string(), &metadata);
  const detseg::Checkpoint checkpoint = detseg::read_checkpoint(ckpt.string());
  ASSERT_EQ(exported.size(), checkpoint.model.size());
  for (size_t i = 0; i < exported.size(); ++i) {
    std::string want = checkpoint.model[i].first;
    if (std::string(c.name) == "deeplabv3") {  // DeepLabHead: ASPP, 3x3 conv, its norm, (ReLU), classifier
      for (const auto& [ours, theirs] : std::vector<std::pair<std::string, std::string>>{
               {"aspp.", "classifier.0."}, {"head_conv.0.", "classifier.1."}, {"head_conv.1.", "classifier.2."},
               {"classifier.", "classifier.4."}})
        if (want.rfind(ours, 0) == 0) {
          want = theirs + want.substr(ours.size());
          break;
        }
    }
    EXPECT_EQ(exported[i].first, want);
    EXPECT_TRUE(at::equal(exported[i].second, checkpoint.model[i].second)) << exported[i].first;
  }
  EXPECT_EQ(metadata["format"], "pt");
  EXPECT_EQ(metadata["detseg.model"], c.name);
  if (std::string(c.name) == "retinanet") {
    EXPECT_EQ(metadata["detseg.class_names"], "[\"RBC\",\"WBC\",\"Platelets\"]");  // the demo label map order
  }

  if (!detseg::test::torchvision_available()) GTEST_SKIP() << DETSEG_PYTHON << " with torchvision not found: strict load not checked";
  const std::string cmd = std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/check_safetensors_export.py " +
                          std::string(c.name) + " " + out.string() + " " + dir.string() + " " + c.peer_args;
  auto peer = detseg::testing::run_command(cmd);
  ASSERT_EQ(peer.code, 0) << cmd << "\n" << peer.output;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  EXPECT_EQ(io.at("num_tensors").toTensor().item<int64_t>(), static_cast<int64_t>(exported.size()));

  // detseg's model from the checkpoint, on the same inputs: forward's outputs, and for Mask R-CNN the
  // box and mask heads on the same crops.
  const detseg::PipelineConfig config = detseg::load_config(config_path);
  at::NoGradGuard no_grad;
  std::shared_ptr<detseg::ModelImpl> model =
      detseg::is_segmentation_model(config)
          ? std::static_pointer_cast<detseg::ModelImpl>(detseg::load_segmenter(config, ckpt.string()))
          : std::static_pointer_cast<detseg::ModelImpl>(detseg::load_detector(config, ckpt.string()));
  std::vector<std::pair<std::string, at::Tensor>> ours;
  const std::vector<at::Tensor> forward = model->network_outputs(io.at("input").toTensor());
  for (size_t i = 0; i < forward.size(); ++i) ours.emplace_back(model->network_output_names()[i], forward[i]);
  for (const auto& graph : model->network_graphs()) {
    const std::vector<at::Tensor> out = model->run_network_graph(graph.name, {io.at(graph.input_names[0]).toTensor()});
    for (size_t i = 0; i < out.size(); ++i) ours.emplace_back(graph.output_names[i], out[i]);
  }
  const std::map<std::string, size_t> outputs = {{"retinanet", 2}, {"faster_rcnn", 9}, {"mask_rcnn", 10}, {"deeplabv3", 1}};
  EXPECT_EQ(ours.size(), outputs.at(c.name));
  for (const auto& [name, mine] : ours) {
    const at::Tensor theirs = io.at(name).toTensor();
    ASSERT_EQ(mine.sizes(), theirs.sizes()) << name;
    EXPECT_LT(scaled_difference(mine, theirs), 1e-4) << name;
  }
  if (std::string(c.name) == "deeplabv3") {
    // The way back, as docs/export.md says: fine-tuning from torchvision's names with the scope map
    // loads every tensor, value for value.
    std::string yaml = c.config;
    yaml.insert(yaml.find("train: {") + 8, "fine_tune: {checkpoint: " + out.string() + ", all_variables: true, "
                "skip_missing: false, scope_map: [classifier.=classifier.4., aspp.=classifier.0., "
                "head_conv.0.=classifier.1., head_conv.1.=classifier.2.]}, ");
    const detseg::PipelineConfig back = detseg::parse_config(yaml, "back.yaml");
    auto fresh = detseg::build_segmenter(back);
    const auto summary = detseg::fine_tune_from_checkpoint(*fresh, back.train.fine_tune);
    EXPECT_EQ(summary.loaded.size(), checkpoint.model.size());
    const detseg::NamedTensors loaded = detseg::module_state(*fresh);
    ASSERT_EQ(loaded.size(), checkpoint.model.size());
    for (size_t i = 0; i < loaded.size(); ++i)
      EXPECT_TRUE(at::equal(loaded[i].second, checkpoint.model[i].second)) << loaded[i].first;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, SafetensorsExport, ::testing::ValuesIn(safetensors_cases()),
                         [](const ::testing::TestParamInfo<SafetensorsCase>& i) { return std::string(i.param.name); });

// Runs predict on `images` with the checkpoint + config and with the exported model.pt alone, and
// expects the same detections (masks too, where the model has them).
void expect_predict_matches(const fs::path& dir, const std::string& config, const std::string& images) {
  auto ts = export_as(config, dir, "torchscript", (dir / "model.pt").string());
  ASSERT_EQ(ts.code, 0) << ts.output;
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
  size_t masks = 0, same_masks = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (used[j] || a[i]["file_name"] != b[j]["file_name"] || a[i]["category_name"] != b[j]["category_name"] ||
          std::abs(a[i]["score"].get<double>() - b[j]["score"].get<double>()) > 1e-4)
        continue;
      bool same_box = true;
      for (int k = 0; k < 4; ++k) same_box &= std::abs(a[i]["bbox"][k].get<double>() - b[j]["bbox"][k].get<double>()) < 1e-2;
      if (same_box) used[j] = found = true;
      if (found && a[i].contains("segmentation")) {
        ASSERT_TRUE(b[j].contains("segmentation")) << b[j].dump();
        ++masks;
        same_masks += a[i]["segmentation"] == b[j]["segmentation"];
      }
    }
    EXPECT_TRUE(found) << "native detection " << i << " " << a[i].dump() << " not among the exported model's";
  }
  // The same RLE, pixel for pixel, but for a rare probability within float error of the threshold.
  EXPECT_GE(same_masks, masks * 95 / 100) << same_masks << " of " << masks << " masks identical";
  if (a[0].contains("segmentation")) {
    EXPECT_GT(masks, 100u);
  }
}

TEST(Export, PredictRunsAnExportedModelWithoutItsConfigAndFindsTheSameDetections) {
  const fs::path dir = fresh_dir("export_predict");
  const std::string config = train_one_step(
      dir, "model: {type: retinanet, num_classes: 3, backbone: resnet18, fpn_channels: 32, image_size: 128}\n"
           "postprocess: {score_threshold: 0.0}\n" + kOneStep + "train_input: " + demo_input() + "\n");
  expect_predict_matches(dir, config, std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images");
  fs::remove_all(dir);
}

TEST(Export, PredictRunsAnExportedMaskRcnnThroughItsThreeGraphs) {
  // forward, box_head and mask_head, with the proposal NMS and the RoI crops in C++ between them.
  const fs::path dir = fresh_dir("export_predict_mask_rcnn");
  const std::string config = train_one_step(
      dir, "model: {type: mask_rcnn, num_classes: 80, backbone: resnet18, fpn_channels: 16, image_size: 128,\n"
           "        faster_rcnn: {number_of_stages: 3, representation_size: 32, mask_head_depth: 8,\n"
           "                      first_stage_max_proposals: 50, second_stage_batch_size: 16}}\n"
           "postprocess: {score_threshold: 0.0}\n"
           // A small step: Adam's default 0.01 saturates the 81-way softmax of a 1-step model (every
           // object class scores exactly 0, so nothing is detected).
           "train: {batch_size: 2, num_steps: 1, checkpoint_every: 1, optimizer: {type: adam},\n"
           "        schedule: {learning_rate: 0.0001}}\n"
           "train_input: " + coco128_input() + "\n");
  const fs::path images = dir / "images";
  fs::create_directories(images);
  for (const char* name : {"000000000009.jpg", "000000000025.jpg"})
    fs::copy_file(std::string(DETSEG_SHARED_DIR) + "/data/coco128/val2017/" + name, images / name);
  expect_predict_matches(dir, config, images.string());
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
  // The checkpoint of another model: refused by the weight check, before anything is written.
  auto frcnn = export_as(config, dir, "onnx", (dir / "m.onnx").string(), "--set model.type=faster_rcnn");
  EXPECT_NE(frcnn.code, 0);
  EXPECT_NE(frcnn.output.find("ckpt-1.dsckpt: model state does not match the model; missing: "), std::string::npos)
      << frcnn.output;
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
                                 "what this config's model takes (feature_p2, feature_p3, feature_p4, feature_p5, feature_p6, rpn_objectness, "
                                 "rpn_box_regression)"),
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

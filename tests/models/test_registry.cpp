// The part tables (config/parts.def; config/registry.h, models/registry.h): every model type and
// backbone combination the config accepts builds and runs, every other is refused in one line;
// every neck and head builds and trains in each dense detector;
// and the worked examples of docs/architecture.md: a new backbone and a new model type, each added
// in one file (this one) and one registration line, trained through the ordinary config.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>

#include <filesystem>
#include <string>

#include "detseg/config/config.h"
#include "detseg/config/registry.h"
#include "detseg/core/error.h"
#include "detseg/engine/train_loop.h"
#include "detseg/models/build.h"
#include "detseg/models/meta_archs/dense_detector.h"
#include "detseg/models/registry.h"
#include "detseg/engine/evaluate.h"
#include "detseg/models/heads/retinanet_head.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

// A config of `type` with `backbone`, small enough to build every combination in seconds.
std::string small_config(const std::string& type, const std::string& backbone) {
  std::string yaml = "model: {type: " + type + ", num_classes: 3, backbone: " + backbone +
                     ", image_size: 128, fpn_channels: 32, frozen_batch_norm: false,\n"
                     "  faster_rcnn: {representation_size: 32, first_stage_box_predictor_depth: 16, mask_head_depth: 8},\n"
                     "  deeplab: {aspp_channels: 16, decoder_channels: 16, low_level_channels: 8, crop_size: 64}}\n";
  if (type == "efficientdet") yaml = "model: {type: efficientdet, efficientdet: d0, num_classes: 3, image_size: 128}\n";
  return yaml;
}

}  // namespace

TEST(Registry, EveryCombinationTheConfigAcceptsBuildsAndRunsAndTheOthersAreRefused) {
  at::NoGradGuard no_grad;
  int built = 0;
  for (const detseg::ModelTypeInfo& type : detseg::model_types()) {
    if (type.type == "one_level") continue;  // the add-a-model example below (one pyramid level only)
    // efficientdet picks its own backbone: model.backbone is not read.
    std::vector<detseg::BackboneInfo> candidates(detseg::backbones().begin(), detseg::backbones().end());
    if (type.families.empty()) candidates = {*detseg::find_backbone("resnet50")};
    for (const detseg::BackboneInfo& backbone : candidates) {
      SCOPED_TRACE(type.type + " + " + backbone.name);
      const std::string yaml = small_config(type.type, backbone.name);
      if (!type.families.empty() && !detseg::model_takes_backbone(type, backbone)) {
        try {
          detseg::parse_config(yaml, "combo.yaml");
          ADD_FAILURE() << "accepted";
        } catch (const detseg::ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("model.backbone: " + type.type + " takes "), std::string::npos) << e.what();
        }
        continue;
      }
      const detseg::PipelineConfig config = detseg::parse_config(yaml, "combo.yaml");
      auto model = detseg::build_model(config);
      model->eval();
      EXPECT_EQ(detseg::is_segmentation_model(config), type.kind == "segmenter");
      const int64_t side = type.kind == "segmenter" ? 64 : 128;
      const std::vector<at::Tensor> out = model->network_outputs(at::randn({1, 3, side, side}));
      ASSERT_EQ(out.size(), model->network_output_names().size());
      for (const at::Tensor& t : out) EXPECT_TRUE(t.isfinite().all().item<bool>());
      ++built;
    }
  }
  // retinanet, faster_rcnn, mask_rcnn x 4 ResNets; 2 DeepLabs x 6 backbones; efficientdet.
  EXPECT_GE(built, 3 * 4 + 2 * 6 + 1);
}

TEST(Registry, EveryNeckAndHeadBuildsAndTrainsInEachDenseDetector) {
  // model.neck x model.head (DETSEG_NECK x DETSEG_DENSE_HEAD lines) in each model type that has them.
  int built = 0;
  for (const detseg::ModelTypeInfo& type : detseg::model_types()) {
    if (type.neck.empty()) continue;
    int64_t anchors = -1;
    for (const detseg::PartInfo& neck : detseg::necks()) {
      for (const detseg::PartInfo& head : detseg::dense_heads()) {
        SCOPED_TRACE(type.type + " + " + neck.name + " + " + head.name);
        std::string yaml = small_config(type.type, "resnet18");
        yaml.insert(yaml.find('{') + 1, "neck: " + neck.name + ", head: " + head.name + ", ");
        const detseg::PipelineConfig config = detseg::parse_config(yaml, "combo.yaml");
        EXPECT_EQ(detseg::neck_of(config.model), neck.name);
        EXPECT_EQ(detseg::head_of(config.model), head.name);
        torch::manual_seed(0);
        auto model = detseg::build_model(config);
        model->train();
        const std::vector<at::Tensor> out = model->network_outputs(at::randn({2, 3, 128, 128}));
        ASSERT_EQ(out.size(), 2u);  // cls_logits [N, A, K], box_regression [N, A, 4]
        EXPECT_EQ(out[0].size(2), 3);
        EXPECT_EQ(out[1].size(2), 4);
        if (anchors < 0) anchors = out[0].size(1);
        EXPECT_EQ(out[0].size(1), anchors);  // the same P3-P7 anchors whatever the parts
        (out[0].sigmoid().sum() + out[1].pow(2).sum()).backward();
        // Every parameter of the neck and the head gets a gradient.
        int64_t neck_and_head = 0;
        for (const auto& p : model->named_parameters()) {
          if (p.key().rfind("backbone.body.", 0) == 0 || (p.key().rfind("backbone.", 0) == 0 && type.type != "retinanet"))
            continue;
          ++neck_and_head;
          EXPECT_TRUE(p.value().grad().defined() && p.value().grad().isfinite().all().item<bool>()) << p.key();
        }
        EXPECT_GT(neck_and_head, 0);
        ++built;
      }
    }
  }
  EXPECT_EQ(built, 2 * static_cast<int>(detseg::necks().size() * detseg::dense_heads().size()));
  // The models' own parts keep the reference layouts (torchvision's for RetinaNet, the reference's
  // for EfficientDet), so checkpoints and pretrained weights load as before.
  auto names_of = [](const std::string& yaml) {
    std::string all;
    for (const auto& p : detseg::build_model(detseg::parse_config(yaml, "default.yaml"))->named_parameters())
      all += p.key() + "\n";
    return all;
  };
  const std::string retinanet = names_of(small_config("retinanet", "resnet18"));
  EXPECT_NE(retinanet.find("backbone.fpn.inner_blocks.0.0.weight\n"), std::string::npos);
  EXPECT_NE(retinanet.find("head.classification_head.cls_logits.bias\n"), std::string::npos);
  const std::string efficientdet = names_of(small_config("efficientdet", ""));
  EXPECT_NE(efficientdet.find("\nfpn.cells.0."), std::string::npos);
  EXPECT_NE(efficientdet.find("\nclass_net.predict."), std::string::npos);
  EXPECT_NE(efficientdet.find("\nbox_net.predict."), std::string::npos);
}

// ---- The worked example (docs/architecture.md, "Add a backbone"): a backbone is a BackboneImpl
// that returns its maps finest first with their feature_specs, and honours BackboneOptions.

class TinyBackboneImpl : public detseg::BackboneImpl {
 public:
  explicit TinyBackboneImpl(const detseg::BackboneOptions& o) : options_(o) {
    // Two stride-2 convs to stride 4 (the decoder's low-level map), then one per further halving.
    auto conv = [&](const std::string& name, int64_t in, int64_t out) {
      convs_.push_back(register_module(name, torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(2).padding(1))));
    };
    conv("stem1", 3, 8);
    conv("stem2", 8, 16);
    int64_t stride = 4, channels = 16;
    for (int i = 0; stride < o.output_stride; ++i, stride *= 2, channels = 32) conv("down" + std::to_string(i), channels, 32);
  }
  std::vector<at::Tensor> forward(const at::Tensor& images) override {
    std::vector<at::Tensor> maps;
    at::Tensor x = images;
    for (size_t i = 0; i < convs_.size(); ++i) {
      x = at::relu(convs_[i]->forward(x));
      if (i == 1 && options_.low_level) maps.push_back(x);
    }
    maps.push_back(x);
    return maps;
  }
  std::vector<detseg::FeatureSpec> feature_specs() const override {
    std::vector<detseg::FeatureSpec> specs;
    if (options_.low_level) specs.push_back({"low", 16, 4});
    specs.push_back({"out", options_.output_stride > 4 ? 32 : 16, options_.output_stride});
    return specs;
  }

 private:
  detseg::BackboneOptions options_;
  std::vector<torch::nn::Conv2d> convs_;
};

TEST(Registry, AddingABackboneIsOneFileAndOneRegistrationLine) {
  // The one line (an application calls it at start-up; a built-in backbone is a line of
  // config/parts.def instead).
  detseg::register_backbone({"tiny_cnn", "tiny", "two strided convs (docs/architecture.md's example)"},
                            [](const std::string&, const detseg::BackboneOptions& o) {
                              return std::make_shared<TinyBackboneImpl>(o);
                            });
  EXPECT_THROW(detseg::register_backbone({"tiny_cnn", "tiny", ""}, nullptr), detseg::ConfigError);
  // Configs name it now: DeepLab (which takes any backbone) trains with it end to end...
  const std::string camvid = std::string(DETSEG_SHARED_DIR) + "/data/camvid/CamVid";
  const std::string input = "{format: seg_folder, images: '" + camvid + "/val', annotations: '" + camvid +
                            "/valannot', void_values: [11], max_images: 3, num_workers: 0}";
  const detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: deeplabv3plus, num_classes: 11, backbone: tiny_cnn,\n"
      "        deeplab: {output_stride: 16, aspp_channels: 16, decoder_channels: 16, low_level_channels: 8, crop_size: 64}}\n"
      "train: {batch_size: 3, num_steps: 3, checkpoint_every: 3, log_every: 1, optimizer: {type: adam},\n"
      "        schedule: {learning_rate: 0.01}}\n"
      "train_input: " + input + "\n",
      "tiny.yaml");
  detseg::testing::TempDir tmp("registry_backbone");
  const fs::path dir = tmp.path() / "model";
  const detseg::TrainResult result = detseg::train_model(config, dir.string());
  EXPECT_EQ(result.step, 3);
  EXPECT_TRUE(std::isfinite(result.last_loss));
  auto model = detseg::build_model(config);
  int64_t tiny_tensors = 0;
  for (const auto& p : model->named_parameters())
    tiny_tensors += p.key().rfind("backbone.stem", 0) == 0 || p.key().rfind("backbone.down", 0) == 0;
  EXPECT_EQ(tiny_tensors, 2 * 4);  // stem1, stem2, down0, down1: weight and bias each (output stride 16)
  // ... and the models tied to the ResNet refuse it in one line.
  try {
    detseg::parse_config("model: {type: retinanet, num_classes: 3, backbone: tiny_cnn}\n", "r.yaml");
    ADD_FAILURE() << "retinanet accepted tiny_cnn";
  } catch (const detseg::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.backbone: retinanet takes resnet18, resnet34, resnet50, resnet101; got "
                                         "tiny_cnn"),
              std::string::npos)
        << e.what();
  }
}

// ---- The second worked example (docs/architecture.md, "Add a model"): a one-level dense detector
// on any registered backbone. Its network returns DenseOutputs; the dense meta-architecture
// (anchors, labeling, focal + box loss, decoding, NMS) comes with dense_detector_options.

class OneLevelDetectorImpl : public torch::nn::Module {
 public:
  explicit OneLevelDetectorImpl(const detseg::PipelineConfig& c) : config_(c) {
    detseg::BackboneOptions b;
    b.output_stride = int64_t(1) << c.model.min_level;  // one map, at the level's stride
    b.frozen_bn = c.model.frozen_batch_norm;
    backbone_ = register_module("backbone", detseg::build_backbone(c.model.backbone, b));
    const int64_t channels = backbone_->feature_specs().back().channels;
    anchors_ = c.model.num_scales * static_cast<int64_t>(c.model.aspect_ratios.size());
    auto conv = [&](int64_t out) { return torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, out, 3).padding(1)); };
    cls_ = register_module("cls", conv(anchors_ * c.model.num_classes));
    box_ = register_module("box", conv(anchors_ * 4));
  }
  detseg::DenseOutputs forward(const at::Tensor& images) {
    const at::Tensor map = backbone_->forward(images).back();
    detseg::DenseOutputs out;
    out.cls_logits = detseg::flatten_dense_prediction(cls_->forward(map), config_.model.num_classes);
    out.box_regression = detseg::flatten_dense_prediction(box_->forward(map), 4);
    detseg::set_level_geometry(out, {map}, config_.model.min_level);
    return out;
  }

 private:
  detseg::PipelineConfig config_;
  std::shared_ptr<detseg::BackboneImpl> backbone_;
  int64_t anchors_ = 0;
  torch::nn::Conv2d cls_{nullptr}, box_{nullptr};
};

TEST(Registry, AddingAModelIsOneFileAndOneRegistrationLine) {
  // The one line: its part-table entry (config/registry.h's ModelTypeInfo, the fields of a
  // parts.def line), its own config rule and its builder.
  detseg::register_model(
      {"one_level", "detector", false, {"*"}, "backbone.", 32,
       [](const detseg::PipelineConfig& c, const std::string& at) {
         DETSEG_CONFIG_CHECK(c.model.min_level == c.model.max_level, at,
                             "model.min_level/max_level: one_level predicts one level");
       },
       "a one-level dense detector (docs/architecture.md's example)"},
      [](const detseg::PipelineConfig& c) {
        auto network = std::make_shared<OneLevelDetectorImpl>(c);
        return std::make_shared<detseg::DenseDetectorImpl>(detseg::dense_detector_options(c), network,
                                                           [network](const at::Tensor& x) { return network->forward(x); });
      });
  EXPECT_THROW(detseg::register_model({"one_level", "detector", false, {"*"}, "backbone.", 32, nullptr, ""}, nullptr),
               detseg::ConfigError);

  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/assets/demo";
  const std::string input = "{format: coco, annotations: '" + demo + "/train.json', images: '" + demo +
                            "/images', max_images: 4, num_workers: 0}";
  const std::string yaml =
      "model: {type: one_level, num_classes: 3, backbone: resnet18, image_size: 128, min_level: 4, max_level: 4,\n"
      "        frozen_batch_norm: false}\n"
      "train: {batch_size: 2, num_steps: 4, checkpoint_every: 4, log_every: 1, seed: 3, optimizer: {type: adam},\n"
      "        schedule: {learning_rate: 0.001}}\n"
      "train_input: " + input + "\neval_input: " + input + "\n";
  const detseg::PipelineConfig config = detseg::parse_config(yaml, "one_level.yaml");
  // Its own rule runs with the shared ones.
  try {
    std::string two_levels = yaml;
    two_levels.replace(two_levels.find("max_level: 4"), 12, "max_level: 5");
    detseg::parse_config(two_levels, "two.yaml");
    ADD_FAILURE() << "two levels accepted";
  } catch (const detseg::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("two.yaml: model.min_level/max_level: one_level predicts one level"),
              std::string::npos) << e.what();
  }
  // Trains, checkpoints and evaluates (COCO, the detector default) like any built-in model.
  detseg::testing::TempDir tmp("registry_model");
  const detseg::TrainResult result = detseg::train_model(config, (tmp.path() / "model").string());
  EXPECT_EQ(result.step, 4);
  EXPECT_TRUE(std::isfinite(result.last_loss));
  auto model = detseg::build_model(config);
  EXPECT_EQ(model->named_parameters().find("cls.weight")->sizes(), (std::vector<int64_t>{9 * 3, 512, 3, 3}));
  const detseg::EvalReport report = detseg::evaluate_model(config, *model, 0);
  EXPECT_EQ(report.num_images, 4);
  EXPECT_GE(report.metrics.get("AP50"), 0.0);  // scored by the COCO evaluator (-1: no such value)
  EXPECT_FALSE(report.detections.empty());
}

// The part tables (config/parts.def; config/registry.h, models/registry.h): every model type and
// backbone combination the config accepts builds and runs, every other is refused in one line;
// and the worked example of docs/architecture.md, a new backbone added in one file (this one) and
// one registration line, trained through the ordinary config.
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
#include "detseg/models/registry.h"

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
    // efficientdet picks its own backbone: model.backbone is not read.
    const std::vector<detseg::BackboneInfo> candidates =
        type.families.empty() ? std::vector<detseg::BackboneInfo>{*detseg::find_backbone("resnet50")} : detseg::backbones();
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
  const fs::path dir = fs::temp_directory_path() / ("detseg_registry_" + std::to_string(::getpid()));
  fs::remove_all(dir);
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
  fs::remove_all(dir);
}

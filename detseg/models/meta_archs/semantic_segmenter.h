// Implements: the semantic-segmentation meta-architecture (DeepLab's model_fn around its network):
// DeepLab's per-scale softmax cross-entropy in training, and at inference one label map per image
// at its original resolution from logits upsampled with aligned corners, optionally averaging the
// softmax over several input scales and their mirror images (DeepLab's eval_scales /
// add_flipped_images).
#pragma once

#include <vector>

#include "detseg/losses/segmentation_loss.h"
#include "detseg/models/deeplab_network.h"
#include "detseg/models/segmenter.h"

namespace detseg {

struct SemanticSegmenterOptions {
  int64_t num_classes = 21;
  int64_t crop_size = 513;              // square training crop (the loader's output size)
  SegmentationLossOptions loss;
  int64_t data_ignore_label = 255;      // what the data pipeline writes for void and padding
  std::vector<double> eval_scales = {1.0};
  bool eval_flip = false;
};

class SemanticSegmenterImpl : public SegmenterImpl {
 public:
  // `network`'s children are registered directly (backbone.*, aspp.*, decoder.*, classifier.*).
  SemanticSegmenterImpl(SemanticSegmenterOptions options, DeepLabNetwork network);

  ModelLosses losses(const Batch& batch) override;
  std::vector<at::Tensor> segment(const Batch& batch) override;
  std::pair<ModelLosses, std::vector<at::Tensor>> losses_and_segment(const Batch& batch) override;
  int64_t input_size() const override { return options_.crop_size; }
  int64_t num_classes() const override { return options_.num_classes; }
  // logits [B, K, h, w] at the network's output stride (upsampled with aligned corners after).
  std::vector<std::string> network_output_names() const override { return {"logits"}; }
  std::vector<at::Tensor> network_outputs(const at::Tensor& images) override { return {run_network(images)}; }
  void use_network(NetworkFunction network) override { exported_ = std::move(network); }
  // Without a decoder (DeepLabv3) the head is torchvision's DeepLabHead under other names.
  std::string torchvision_name(const std::string& name) const override;

  // Class probabilities [1, K, out_h, out_w] of one normalised image [1, 3, h, w], averaged over
  // the eval scales and flips.
  at::Tensor probabilities(const at::Tensor& image, int64_t out_h, int64_t out_w);
  const SemanticSegmenterOptions& options() const { return options_; }
  DeepLabNetwork& network() { return network_; }

 private:
  SemanticSegmenterOptions options_;
  DeepLabNetwork network_;
  NetworkFunction exported_;  // set by use_network: runs in place of network_

  at::Tensor run_network(const at::Tensor& images);

  ModelLosses losses_from(const at::Tensor& logits, const Batch& batch);
  bool single_pass() const;
};

}  // namespace detseg

// Implements: the one-stage (dense) detector shared by RetinaNet and EfficientDet: a network that
// predicts a class and a box for every anchor, EfficientDet's anchor labeler and detection loss in
// training, and top-k selection, decoding and per-class NMS at inference. The two models differ
// only in the network they hold.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "detseg/losses/detection_loss.h"
#include "detseg/models/dense_outputs.h"
#include "detseg/models/detector.h"
#include "detseg/ops/anchors.h"
#include "detseg/ops/target_assigner.h"
#include "detseg/postprocess/nms_choice.h"

namespace detseg {

struct DensePostprocessOptions {
  int64_t max_detection_points = 5000;  // (anchor, class) candidates kept before NMS; 0: all anchors
  double score_threshold = 0.05;
  double nms_iou_threshold = 0.5;
  int64_t max_detections_per_image = 100;
  NmsMethod nms = NmsMethod::kPerClass;  // postprocess.nms
  double soft_nms_sigma = 0.5;
};

struct DenseDetectorOptions {
  int64_t num_classes = 1;
  int64_t image_size = 512;
  int64_t size_divisibility = 0;  // keep_aspect: batches of any multiple of this (anchors per size); 0: square
  MultiLevelAnchorOptions anchors;
  AnchorLabelerOptions labeler;
  DetectionLossOptions loss;
  DensePostprocessOptions postprocess;
};

class DenseDetectorImpl : public DetectorImpl {
 public:
  using NetworkForward = std::function<DenseOutputs(const at::Tensor& images)>;

  // `network`'s children are registered directly on the detector, so parameter names are the
  // network's own (backbone.body..., head...: torchvision's layout for RetinaNet).
  DenseDetectorImpl(DenseDetectorOptions options, std::shared_ptr<torch::nn::Module> network,
                    NetworkForward forward);

  ModelLosses losses(const Batch& batch) override;
  std::vector<Boxes> detect(const Batch& batch) override;
  std::pair<ModelLosses, std::vector<Boxes>> losses_and_detect(const Batch& batch) override;
  int64_t input_size() const override { return options_.image_size; }
  // cls_logits [B, A, K] and box_regression [B, A, 4]; constants: the anchors [A, 4] xyxy.
  std::vector<std::string> network_output_names() const override;
  std::vector<at::Tensor> network_outputs(const at::Tensor& images) override;
  std::vector<std::pair<std::string, at::Tensor>> network_constants(int64_t height, int64_t width,
                                                                    const at::Device& device) const override;
  void use_network(NetworkFunction network) override;

  // Anchors for a height x width batch in the network's output order, [A, 4] xyxy (cached per size
  // and device), and the pyramid's (h, w) per level.
  at::Tensor anchors_for(int64_t height, int64_t width, const at::Device& device) const;
  std::vector<std::pair<int64_t, int64_t>> level_sizes_for(int64_t height, int64_t width) const;
  // Dense targets for a batch, anchors in the network's output order:
  //   cls [B, A] int64 (k >= 0 class, -1 background, -2 ignored), box [B, A, 4] codes.
  std::pair<at::Tensor, at::Tensor> targets(const Batch& batch);
  // Detections of one image from raw outputs, in network-input pixels (before mapping back), for
  // anchors made for that input (anchors_for).
  Boxes postprocess(const at::Tensor& cls_logits, const at::Tensor& box_regression, const at::Tensor& anchors,
                    int64_t valid_height, int64_t valid_width) const;
  // The anchors of an image_size square input on the CPU; anchors_on(device): cached copies.
  const at::Tensor& anchors() const { return anchors_.cpu(); }
  at::Tensor anchors_on(const at::Device& device) const { return anchors_.on(device); }
  const DenseDetectorOptions& options() const { return options_; }

 private:
  DenseDetectorOptions options_;
  std::shared_ptr<torch::nn::Module> network_;
  NetworkForward forward_;
  DeviceCachedTensor anchors_;  // [A, 4] xyxy for an image_size x image_size input (CPU + copies)
  std::vector<std::pair<int64_t, int64_t>> level_sizes_;
  // keep_aspect: anchors of other batch sizes, keyed by (height, width).
  mutable std::mutex anchor_cache_mutex_;
  mutable std::map<std::pair<int64_t, int64_t>, DeviceCachedTensor> anchor_cache_;

  void check_input(const Batch& batch) const;
  ModelLosses losses_from(const DenseOutputs& out, const Batch& batch);
  std::vector<Boxes> detections_from(const DenseOutputs& out, const Batch& batch) const;
};

}  // namespace detseg

#include "detseg/models/meta_archs/dense_detector.h"

#include "detseg/core/error.h"
#include "detseg/core/profile_scope.h"
#include "detseg/data/example.h"
#include "detseg/ops/box_coder.h"
#include "detseg/ops/nms.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

DenseDetectorImpl::DenseDetectorImpl(DenseDetectorOptions options, std::shared_ptr<torch::nn::Module> network,
                                     NetworkForward forward)
    : options_(std::move(options)), network_(std::move(network)), forward_(std::move(forward)) {
  for (auto& child : network_->named_children()) register_module(child.key(), child.value());
  options_.anchors.image_height = options_.image_size;
  options_.anchors.image_width = options_.image_size;
  anchors_ = DeviceCachedTensor(multilevel_anchors(options_.anchors));
  level_sizes_ = level_sizes(options_.anchors);
}

at::Tensor DenseDetectorImpl::anchors_for(int64_t height, int64_t width, const at::Device& device) const {
  if (height == options_.image_size && width == options_.image_size) return anchors_.on(device);
  std::lock_guard<std::mutex> lock(anchor_cache_mutex_);
  auto it = anchor_cache_.find({height, width});
  if (it == anchor_cache_.end()) {
    MultiLevelAnchorOptions o = options_.anchors;
    o.image_height = height;
    o.image_width = width;
    it = anchor_cache_.emplace(std::make_pair(height, width), DeviceCachedTensor(multilevel_anchors(o))).first;
  }
  return it->second.on(device);
}

std::vector<std::pair<int64_t, int64_t>> DenseDetectorImpl::level_sizes_for(int64_t height, int64_t width) const {
  if (height == options_.image_size && width == options_.image_size) return level_sizes_;
  MultiLevelAnchorOptions o = options_.anchors;
  o.image_height = height;
  o.image_width = width;
  return level_sizes(o);
}

std::vector<std::string> DenseDetectorImpl::network_output_names() const {
  return {"cls_logits", "box_regression"};
}

std::vector<at::Tensor> DenseDetectorImpl::network_outputs(const at::Tensor& images) {
  const DenseOutputs out = forward_(images);
  return {out.cls_logits, out.box_regression};
}

std::vector<std::pair<std::string, at::Tensor>> DenseDetectorImpl::network_constants(int64_t height, int64_t width,
                                                                                     const at::Device& device) const {
  return {{"anchors", anchors_for(height, width, device)}};
}

void DenseDetectorImpl::use_network(NetworkFunction network) {
  forward_ = [network = std::move(network)](const at::Tensor& images) {
    std::vector<at::Tensor> raw = network("forward", {images});
    DETSEG_CHECK(raw.size() >= 2, "dense detector: the exported network returned ", raw.size(),
                 " tensors, expected cls_logits and box_regression");
    DenseOutputs out;
    out.cls_logits = raw[0];
    out.box_regression = raw[1];
    return out;
  };
}

std::pair<at::Tensor, at::Tensor> DenseDetectorImpl::targets(const Batch& batch) {
  const int64_t batch_size = batch.size();
  std::vector<at::Tensor> cls(batch_size), box(batch_size);
  const int64_t per_location = anchors_per_location(options_.anchors);
  const int64_t height = batch.images.size(2), width = batch.images.size(3);
  // Targets are made on the ground truth's device (the anchors' copy there is cached).
  const at::Tensor anchors = anchors_for(height, width, batch.boxes.device());
  const auto levels = level_sizes_for(height, width);
  // num_boxes is a host tensor (see Batch); to(kCPU) is a no-op then and keeps the reads free.
  const at::Tensor num_boxes = batch.num_boxes.to(at::kCPU);
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t n = num_boxes[b].item<int64_t>();
    at::Tensor gt_boxes = batch.boxes[b].slice(0, 0, n).to(at::kFloat);
    at::Tensor gt_classes = batch.classes[b].slice(0, 0, n);
    if (batch.iscrowd.defined() && n > 0) {
      // Crowd regions are evaluation-only: they are neither positives nor negatives to match.
      at::Tensor keep = batch.iscrowd[b].slice(0, 0, n).logical_not();
      gt_boxes = gt_boxes.index({keep});
      gt_classes = gt_classes.index({keep});
    }
    DenseTargets t = label_anchors(anchors, levels, per_location, gt_boxes, gt_classes, options_.labeler);
    std::vector<at::Tensor> level_cls, level_box;
    for (size_t l = 0; l < t.cls_targets.size(); ++l) {
      level_cls.push_back(t.cls_targets[l].reshape({-1}));
      level_box.push_back(t.box_targets[l].reshape({-1, 4}));
    }
    cls[b] = at::cat(level_cls);
    box[b] = at::cat(level_box);
  }
  return {at::stack(cls), at::stack(box)};
}

void DenseDetectorImpl::check_input(const Batch& batch) const {
  check_detector_input(batch.images, options_.image_size, options_.size_divisibility, "dense detector");
}

ModelLosses DenseDetectorImpl::losses(const Batch& batch) {
  check_input(batch);
  DenseOutputs out;
  {
    DETSEG_PROFILE_SCOPE("detseg::network");
    out = forward_(batch.images);
  }
  return losses_from(out, batch);
}

std::vector<Boxes> DenseDetectorImpl::detect(const Batch& batch) {
  check_input(batch);
  return detections_from(forward_(batch.images), batch);
}

std::pair<ModelLosses, std::vector<Boxes>> DenseDetectorImpl::losses_and_detect(const Batch& batch) {
  check_input(batch);
  DenseOutputs out = forward_(batch.images);
  return {losses_from(out, batch), detections_from(out, batch)};
}

ModelLosses DenseDetectorImpl::losses_from(const DenseOutputs& out, const Batch& batch) {
  DETSEG_PROFILE_SCOPE("detseg::targets_and_loss");
  auto [cls_targets, box_targets] = targets(batch);
  DETSEG_CHECK(out.cls_logits.size(1) == cls_targets.size(1), "dense detector: the network predicts ",
               out.cls_logits.size(1), " anchors but the anchor generator made ", cls_targets.size(1));
  const auto device = out.cls_logits.device();
  const at::Tensor anchors = anchors_for(batch.images.size(2), batch.images.size(3), device);
  DetectionLosses l = detection_loss(out.cls_logits, out.box_regression, cls_targets.to(device),
                                     box_targets.to(device), options_.loss, anchors);
  ModelLosses result;
  result.total = l.total;
  result.parts = {{"cls_loss", l.cls}, {"box_loss", l.box}, {"num_positives", l.num_positives - 1}};
  return result;
}

Boxes DenseDetectorImpl::postprocess(const at::Tensor& cls_logits, const at::Tensor& box_regression,
                                     const at::Tensor& all_anchors, int64_t valid_height, int64_t valid_width) const {
  // cls_logits: [A, K], box_regression: [A, 4]
  const auto& post = options_.postprocess;
  at::Tensor scores, anchor_index, classes;
  if (post.max_detection_points > 0) {
    TopK top = select_top_k(cls_logits.unsqueeze(0), post.max_detection_points);
    scores = top.scores[0];
    anchor_index = top.anchor_indices[0];
    classes = top.classes[0];
  } else {
    // Every anchor with its best class, as the reference does when top-k is off.
    std::tie(scores, classes) = cls_logits.max(1);
    anchor_index = at::arange(cls_logits.size(0), classes.options());
  }
  // fp32 scores (and decoded boxes) even when the head ran in bf16/fp16 under autocast.
  scores = upcast_low_precision(scores).sigmoid();
  at::Tensor keep = scores >= post.score_threshold;
  scores = scores.index({keep});
  classes = classes.index({keep});
  anchor_index = anchor_index.index({keep});
  at::Tensor anchors = all_anchors.index_select(0, anchor_index);
  at::Tensor boxes = decode_boxes(box_regression.index_select(0, anchor_index).to(at::kFloat), anchors);
  // Keep predictions inside the valid (unpadded) image region.
  boxes = at::stack({boxes.select(1, 0).clamp(0, valid_width), boxes.select(1, 1).clamp(0, valid_height),
                     boxes.select(1, 2).clamp(0, valid_width), boxes.select(1, 3).clamp(0, valid_height)},
                    1);
  NmsChoice choice;
  choice.method = post.nms;
  choice.iou_threshold = post.nms_iou_threshold;
  choice.soft_sigma = post.soft_nms_sigma;
  choice.score_threshold = post.score_threshold;
  choice.max_detections = post.max_detections_per_image;
  const SelectedDetections kept = select_detections(boxes, scores, classes, choice);
  Boxes result(boxes.index_select(0, kept.indices));
  result.scores = kept.scores;
  result.classes = classes.index_select(0, kept.indices);
  return result;
}

std::vector<Boxes> DenseDetectorImpl::detections_from(const DenseOutputs& out, const Batch& batch) const {
  std::vector<Boxes> results;
  const at::Tensor anchors = anchors_for(batch.images.size(2), batch.images.size(3), out.box_regression.device());
  for (int64_t b = 0; b < batch.size(); ++b) {
    const int64_t h = batch.image_sizes[b][0].item<int64_t>();
    const int64_t w = batch.image_sizes[b][1].item<int64_t>();
    Boxes d = postprocess(out.cls_logits[b].detach(), out.box_regression[b].detach(), anchors, h, w);
    d.boxes = geometry_invert_boxes(batch.geometries[static_cast<size_t>(b)], d.boxes);
    results.push_back(std::move(d));
  }
  return results;
}

}  // namespace detseg

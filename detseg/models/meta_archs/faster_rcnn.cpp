// Implements: the Faster R-CNN / Mask R-CNN meta-architecture (see faster_rcnn.h).
#include "detseg/models/meta_archs/faster_rcnn.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/core/profile_scope.h"
#include "detseg/losses/two_stage_loss.h"
#include "detseg/ops/anchors.h"
#include "detseg/ops/box_coder.h"
#include "detseg/ops/box_ops.h"
#include "detseg/ops/crop_and_resize.h"
#include "detseg/ops/nms.h"
#include "detseg/ops/roi_align.h"
#include "detseg/ops/sampler.h"
#include "detseg/ops/target_assigner.h"
#include "detseg/structures/tensor_utils.h"

namespace detseg {

namespace {

// torchvision's (dx, dy, dw, dh) <-> the coder's (ty, tx, th, tw): the same swap both ways.
at::Tensor swap_xy(const at::Tensor& codes) {
  return at::stack({codes.select(-1, 1), codes.select(-1, 0), codes.select(-1, 3), codes.select(-1, 2)}, -1);
}

BoxCoderOptions coder(const std::vector<double>& scales) {
  BoxCoderOptions c;
  c.scale_factors = {scales.at(0), scales.at(1), scales.at(2), scales.at(3)};
  c.max_log_size = std::log(1000.0 / 16);  // torchvision's clamp: decode never overflows
  return c;
}

TargetAssignerOptions first_stage_assigner(const FasterRcnnOptions& o) {
  TargetAssignerOptions t;
  t.matcher.matched_threshold = o.first_stage_matched_threshold;
  t.matcher.unmatched_threshold = o.first_stage_unmatched_threshold;
  t.matcher.force_match_for_each_row = true;
  t.coder = coder(o.first_stage_box_coder_scales);
  return t;
}

// The reference's detector assigner: IoU >= threshold positive, everything below negative.
TargetAssignerOptions second_stage_assigner(const FasterRcnnOptions& o) {
  TargetAssignerOptions t;
  t.matcher.matched_threshold = o.second_stage_matched_threshold;
  t.coder = coder(o.second_stage_box_coder_scales);
  return t;
}

// Second-stage scores by per-class sigmoids instead of a softmax (the sigmoid classification loss).
bool sigmoid_scores(const FasterRcnnOptions& o) { return o.second_stage_classification_loss == "sigmoid"; }

// RoIs [N, 5] of image b of the batch (batch index first).
at::Tensor image_rois(const at::Tensor& boxes, int64_t b) {
  return at::cat({at::full({boxes.size(0), 1}, static_cast<double>(b), boxes.options()), boxes}, 1);
}

// A 0-dim int64 zero (the background label) made directly on `device`.
at::Tensor long_zero(const at::Device& device) {
  return at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device));
}

}  // namespace

FasterRcnnImpl::FasterRcnnImpl(FasterRcnnOptions options, FasterRcnnNetworkOptions network_options)
    : options_(std::move(options)) {
  const auto& o = options_;
  // The network must be the one the options describe (FPN or C4), then the config's own rules.
  DETSEG_CONFIG_CHECK(network_options.c4() == (o.feature_extractor == "c4"), "model.faster_rcnn.feature_extractor: ",
                      o.feature_extractor, " but the network is built ", network_options.c4() ? "C4" : "FPN");
  check_faster_rcnn_config(o, network_options.masks());
  network_options.num_classes(o.num_classes)
      .num_anchors(static_cast<int64_t>(o.first_stage_anchor_scales.size() * o.first_stage_anchor_aspect_ratios.size()));
  network = FasterRcnnNetwork(network_options);
  // Children registered directly, so parameter names are torchvision's (backbone.*, rpn.*, roi_heads.*).
  for (auto& child : network->named_children()) register_module(child.key(), child.value());
}

int64_t FasterRcnnImpl::stages() const {
  return is_training() ? std::min<int64_t>(options_.number_of_stages, 2) : options_.number_of_stages;
}

int64_t FasterRcnnImpl::max_num_proposals() const {
  if (is_training() && stages() >= 2 && options_.hard_example_miner_num_examples == 0) return options_.second_stage_batch_size;
  return options_.first_stage_max_proposals;
}

at::Tensor FasterRcnnImpl::anchors_for(const std::vector<std::array<int64_t, 2>>& level_sizes,
                                       const at::Device& device) const {
  std::vector<int64_t> key;
  for (const auto& hw : level_sizes) key.insert(key.end(), hw.begin(), hw.end());
  auto it = anchor_cache_.find(key);
  if (it != anchor_cache_.end()) return it->second.on(device);
  std::vector<at::Tensor> levels;
  const std::vector<int64_t> strides = network->strides();
  for (size_t l = 0; l < level_sizes.size(); ++l) {
    GridAnchorOptions g;
    g.scales = options_.first_stage_anchor_scales;
    g.aspect_ratios = options_.first_stage_anchor_aspect_ratios;
    g.base_anchor_size = {options_.first_stage_anchor_sizes[l], options_.first_stage_anchor_sizes[l]};
    const double stride = static_cast<double>(strides[l]);
    g.anchor_stride = {stride, stride};
    g.anchor_offset = {0, 0};  // torchvision: cell (y, x) centred at (y * s, x * s)
    levels.push_back(grid_anchors(g, level_sizes[l][0], level_sizes[l][1]));
  }
  DeviceCachedTensor anchors(at::cat(levels));
  anchor_cache_[key] = anchors;
  return anchors.on(device);
}

void FasterRcnnImpl::check_input(const Batch& batch) const {
  check_detector_input(batch.images, options_.image_size, options_.size_divisibility, "faster_rcnn");
}

FasterRcnnImpl::GroundTruth FasterRcnnImpl::ground_truth(const Batch& batch, int64_t b) const {
  GroundTruth gt;
  DETSEG_CHECK(batch.boxes.defined() && batch.num_boxes.defined(), "faster_rcnn: the batch has no ground truth");
  // num_boxes is a host tensor (see Batch): reading it does not synchronise a device.
  const int64_t n = batch.num_boxes[b].item<int64_t>();
  gt.boxes = batch.boxes[b].slice(0, 0, n).to(at::kFloat);
  gt.classes = batch.classes[b].slice(0, 0, n);
  if (batch.masks.defined()) gt.masks = batch.masks[b].slice(0, 0, n);
  if (batch.iscrowd.defined() && n > 0) {
    // Crowd regions are evaluation-only: neither positives nor negatives.
    at::Tensor keep = batch.iscrowd[b].slice(0, 0, n).logical_not().nonzero().squeeze(1);
    gt.boxes = gt.boxes.index_select(0, keep);
    gt.classes = gt.classes.index_select(0, keep);
    if (gt.masks.defined()) gt.masks = gt.masks.index_select(0, keep);
  }
  return gt;
}

FasterRcnnPredictions FasterRcnnImpl::predict(const Batch& batch) {
  check_input(batch);
  const auto& o = options_;
  const bool training = is_training();
  const int64_t num_stages = stages();
  FasterRcnnPredictions p;
  p.features = network_outputs(batch.images);
  p.rpn_box_encodings = swap_xy(p.features.back());
  p.features.pop_back();
  p.rpn_objectness = p.features.back();
  p.features.pop_back();
  const at::Tensor& objectness = p.rpn_objectness;
  std::vector<std::array<int64_t, 2>> sizes;
  for (size_t l = 0; l < p.features.size(); ++l) sizes.push_back({p.features[l].size(2), p.features[l].size(3)});
  const auto device = batch.images.device();
  p.anchors = anchors_for(sizes, device);
  DETSEG_CHECK(p.anchors.size(0) == objectness.size(1), "faster_rcnn: ", p.anchors.size(0), " anchors for ",
               objectness.size(1), " RPN outputs");

  // Anchors that leave the (padded) image: pruned in training, clipped otherwise.
  const int64_t batch_size = batch.images.size(0);
  const Window padded{0, 0, static_cast<double>(batch.images.size(3)), static_cast<double>(batch.images.size(2))};
  at::Tensor used_anchors;
  if (training && !o.first_stage_clip_anchors_to_image) {
    std::tie(std::ignore, p.anchor_indices) = prune_outside_window(Boxes(p.anchors), padded);
    used_anchors = p.anchors.index_select(0, p.anchor_indices);
  } else {
    p.anchor_indices = at::arange(p.anchors.size(0), at::TensorOptions().dtype(at::kLong).device(device));
    used_anchors = clip_boxes(p.anchors, padded);
  }
  p.raw_proposal_boxes =
      decode_boxes(p.rpn_box_encodings.detach().index_select(1, p.anchor_indices), used_anchors,
                   coder(o.first_stage_box_coder_scales));
  // fp32 proposals and scores whatever precision the RPN head ran in (decode_boxes upcasts too).
  p.raw_proposal_scores =
      upcast_low_precision(p.rpn_objectness.detach().index_select(1, p.anchor_indices)).sigmoid();

  const int64_t max_proposals = max_num_proposals();
  p.proposal_boxes = at::zeros({batch_size, max_proposals, 4}, p.raw_proposal_boxes.options());
  p.proposal_scores = at::zeros({batch_size, max_proposals}, p.raw_proposal_boxes.options());
  p.num_proposals = at::zeros({batch_size}, at::kLong);  // host counts, read without a device sync
  const bool sample = training && num_stages >= 2 && o.hard_example_miner_num_examples == 0;
  for (int64_t b = 0; b < batch_size; ++b) {
    const double h = batch.image_sizes[b][0].item<double>(), w = batch.image_sizes[b][1].item<double>();
    at::Tensor boxes = p.raw_proposal_boxes[b], scores = p.raw_proposal_scores[b];
    if (o.first_stage_pre_nms_top_k > 0 && scores.size(0) > o.first_stage_pre_nms_top_k) {
      at::Tensor top = std::get<1>(scores.topk(o.first_stage_pre_nms_top_k));
      boxes = boxes.index_select(0, top);
      scores = scores.index_select(0, top);
    }
    MultiClassNmsOptions nms;
    nms.score_threshold = o.first_stage_nms_score_threshold;
    nms.iou_threshold = o.first_stage_nms_iou_threshold;
    nms.max_per_class = o.first_stage_max_proposals;
    nms.max_total = o.first_stage_max_proposals;
    nms.clip_window = Window{0, 0, w, h};
    Boxes proposals = multiclass_nms(boxes, scores.unsqueeze(1), nms);
    at::Tensor prop_boxes = proposals.boxes, prop_scores = proposals.scores;
    if (sample) {
      GroundTruth gt = ground_truth(batch, b);
      if (o.second_stage_add_groundtruth_proposals && gt.boxes.size(0) > 0) {
        prop_boxes = at::cat({prop_boxes, gt.boxes.to(prop_boxes.options())});
        prop_scores = at::cat({prop_scores, at::ones({gt.boxes.size(0)}, prop_scores.options())});
      }
      AssignedTargets t = assign_targets(prop_boxes, gt.boxes.to(device), gt.classes.to(device) + 1,
                                         long_zero(device), second_stage_assigner(o));
      BalancedSamplerOptions so;
      so.positive_fraction = o.second_stage_balance_fraction;
      so.batch_size = o.second_stage_batch_size;
      at::Tensor selected = sample_balanced(t.cls_weights > 0, t.match >= 0, so).nonzero().squeeze(1);
      prop_boxes = prop_boxes.index_select(0, selected);
      prop_scores = prop_scores.index_select(0, selected);
    }
    const int64_t n = std::min<int64_t>(prop_boxes.size(0), max_proposals);
    p.proposal_boxes[b].slice(0, 0, n).copy_(prop_boxes.slice(0, 0, n));
    p.proposal_scores[b].slice(0, 0, n).copy_(prop_scores.slice(0, 0, n));
    p.num_proposals[b] = n;
  }
  if (num_stages < 2) return p;

  // Second stage on the valid (non-padded) rows; padded rows stay zero.
  std::vector<at::Tensor> per_image;
  std::vector<at::Tensor> rows;
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t n = p.num_proposals[b].item<int64_t>();
    per_image.push_back(p.proposal_boxes[b].slice(0, 0, n));
    rows.push_back(at::arange(b * max_proposals, b * max_proposals + n,
                              at::TensorOptions().dtype(at::kLong).device(device)));
  }
  const at::Tensor rois = boxes_to_rois(per_image);
  const at::Tensor row_index = at::cat(rows);
  const std::vector<at::Tensor> head =
      run_graph("box_head", {network->roi_features(p.features, rois, network->options.box_pool_size())});
  // C4: the mask head reads the layer4 features wherever it runs on the proposals (training, or
  // inference with 2 stages), as the reference's box_classifier_features.
  if (network->options.c4() && network->options.masks() && (training || num_stages == 2))
    p.box_classifier_features = head.at(2);
  const at::Tensor& logits = head.at(0);
  at::Tensor box_deltas = head.at(1).unflatten(1, {-1, 4});
  if (box_deltas.size(1) > 1) box_deltas = box_deltas.slice(1, 1);  // drop torchvision's background box
  const int64_t total = batch_size * max_proposals;
  p.class_predictions_with_background =
      at::zeros({total, logits.size(1)}, logits.options()).index_copy_(0, row_index, logits);
  p.refined_box_encodings =
      at::zeros({total, box_deltas.size(1), 4}, box_deltas.options()).index_copy_(0, row_index, swap_xy(box_deltas));
  return p;
}

ModelLosses FasterRcnnImpl::loss(const FasterRcnnPredictions& p, const Batch& batch,
                                 const std::vector<Boxes>& detections) {
  const auto& o = options_;
  const int64_t batch_size = batch.images.size(0);
  const auto device = batch.images.device();
  // Losses accumulate in fp32 on the predictions' device, even for bf16/fp16 heads (autocast).
  const auto fopts = p.rpn_objectness.options().dtype(at::kFloat);
  ModelLosses result;

  // ---- first stage ----
  const Window padded{0, 0, static_cast<double>(batch.images.size(3)), static_cast<double>(batch.images.size(2))};
  at::Tensor used_anchors = p.anchors.index_select(0, p.anchor_indices);
  if (!(is_training() && !o.first_stage_clip_anchors_to_image)) used_anchors = clip_boxes(used_anchors, padded);
  at::Tensor rpn_loc = at::zeros({}, fopts), rpn_obj = at::zeros({}, fopts);
  BalancedSamplerOptions rpn_sampler;
  rpn_sampler.batch_size = o.first_stage_minibatch_size;
  rpn_sampler.positive_fraction = o.first_stage_positive_balance_fraction;
  for (int64_t b = 0; b < batch_size; ++b) {
    GroundTruth gt = ground_truth(batch, b);
    const int64_t m = gt.boxes.size(0);
    AssignedTargets t = assign_targets(used_anchors, gt.boxes.to(device),
                                       at::ones({m}, at::TensorOptions().dtype(at::kLong).device(device)),
                                       long_zero(device), first_stage_assigner(o));
    const at::Tensor positive = t.match >= 0;
    const at::Tensor sampled = sample_balanced(t.cls_weights > 0, positive, rpn_sampler).to(fopts);
    auto [loc, obj] = rpn_image_loss(p.rpn_objectness[b].index_select(0, p.anchor_indices),
                                     p.rpn_box_encodings[b].index_select(0, p.anchor_indices), positive, t.reg_targets,
                                     t.reg_weights, sampled);
    rpn_loc = rpn_loc + loc;
    rpn_obj = rpn_obj + obj;
  }
  rpn_loc = rpn_loc / batch_size * o.first_stage_localization_loss_weight;
  rpn_obj = rpn_obj / batch_size * o.first_stage_objectness_loss_weight;
  result.parts = {{"first_stage_localization_loss", rpn_loc}, {"first_stage_objectness_loss", rpn_obj}};
  result.total = rpn_loc + rpn_obj;
  if (stages() < 2) return result;

  // ---- second stage ----
  const int64_t max_proposals = p.proposal_boxes.size(1);
  const int64_t k1 = p.class_predictions_with_background.size(1);
  at::Tensor cls = p.class_predictions_with_background.view({batch_size, max_proposals, k1});
  at::Tensor enc = p.refined_box_encodings.view({batch_size, max_proposals, -1, 4});
  // Per-proposal losses [B, P], zero on padded rows.
  std::vector<at::Tensor> loc_rows, cls_rows, matches, decoded;
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t n = p.num_proposals[b].item<int64_t>();
    GroundTruth gt = ground_truth(batch, b);
    at::Tensor proposals = p.proposal_boxes[b].slice(0, 0, n);
    AssignedTargets t = assign_targets(proposals, gt.boxes.to(device), gt.classes.to(device) + 1,
                                       long_zero(device), second_stage_assigner(o));
    matches.push_back(at::cat({t.match, at::full({max_proposals - n}, kMatchUnmatched, t.match.options())}));
    decoded.push_back(p.proposal_boxes[b]);
    at::Tensor pad = at::zeros({max_proposals - n}, fopts);
    if (n == 0) {
      loc_rows.push_back(pad);
      cls_rows.push_back(pad);
      continue;
    }
    // Each proposal's loss / (num_proposals * batch_size): the reference's normaliser.
    const double normalizer = static_cast<double>(n * batch_size);
    auto [loc, ce] = box_classifier_loss(cls[b].slice(0, 0, n), enc[b].slice(0, 0, n), t.cls_targets, t.cls_weights,
                                         t.reg_targets, t.reg_weights, sigmoid_scores(o));
    loc_rows.push_back(at::cat({loc / normalizer, pad}));
    cls_rows.push_back(at::cat({ce / normalizer, pad}));
  }
  at::Tensor loc_losses = at::stack(loc_rows), cls_losses = at::stack(cls_rows);
  at::Tensor box_loc, box_cls;
  if (o.hard_example_miner_num_examples > 0) {
    HardExampleMinerOptions miner;
    miner.num_hard_examples = o.hard_example_miner_num_examples;
    miner.iou_threshold = o.hard_example_miner_iou_threshold;
    MinedLosses mined = mine_hard_examples(loc_losses, cls_losses, decoded, miner, matches);
    box_loc = mined.location_loss;
    box_cls = mined.classification_loss;
  } else {
    box_loc = loc_losses.sum();
    box_cls = cls_losses.sum();
  }
  box_loc = box_loc * o.second_stage_localization_loss_weight;
  box_cls = box_cls * o.second_stage_classification_loss_weight;
  result.parts.push_back({"second_stage_localization_loss", box_loc});
  result.parts.push_back({"second_stage_classification_loss", box_cls});
  result.total = result.total + box_loc + box_cls;

  // ---- masks: on the sampled proposals in training, on the detections otherwise ----
  if (network->options.masks() && batch.masks.defined()) {
    std::vector<at::Tensor> boxes;
    if (is_training()) {
      for (int64_t b = 0; b < batch_size; ++b)
        boxes.push_back(p.proposal_boxes[b].slice(0, 0, p.num_proposals[b].item<int64_t>()));
    } else {
      for (const Boxes& d : detections) boxes.push_back(d.boxes.to(device));
    }
    // Only positives carry mask loss, so the mask head runs on them alone (as torchvision does);
    // p.mask_logits, when given, holds every box's logits and is indexed instead, and in training
    // C4's p.box_classifier_features (every proposal's) are.
    std::vector<at::Tensor> pos_boxes, pos_rows, pos_classes, targets;
    int64_t row = 0;
    for (int64_t b = 0; b < static_cast<int64_t>(boxes.size()); ++b) {
      const int64_t n = boxes[b].size(0);
      GroundTruth gt = ground_truth(batch, b);
      at::Tensor pos = at::zeros({0}, at::TensorOptions().dtype(at::kLong).device(device));
      at::Tensor classes = pos, target = at::zeros({0}, fopts);
      if (n > 0 && gt.boxes.size(0) > 0) {
        AssignedTargets t = assign_targets(boxes[b], gt.boxes.to(device), gt.classes.to(device) + 1,
                                           long_zero(device), second_stage_assigner(o));
        pos = (t.match >= 0).nonzero().squeeze(1);
        classes = t.cls_targets.index_select(0, pos);
        // Ground-truth masks cropped to each proposal (normalised to the padded image) and
        // resized to the mask size, gradients stopped.
        const int64_t size = network->mask_size();
        CropAndResizeOptions cr;
        cr.crop_size = {size, size};
        at::Tensor norm_boxes = xyxy_to_normalized_yxyx(boxes[b].index_select(0, pos),
                                                        static_cast<double>(batch.images.size(2)),
                                                        static_cast<double>(batch.images.size(3)));
        if (pos.numel() > 0)
          target = crop_and_resize(gt.masks.to(device).to(fopts.dtype()).unsqueeze(1), norm_boxes,
                                   t.match.index_select(0, pos).to(at::kInt), cr)
                       .squeeze(1)
                       .detach();
      }
      pos_boxes.push_back(boxes[b].index_select(0, pos));
      pos_rows.push_back(pos + row);
      pos_classes.push_back(classes);
      targets.push_back(target);
      row += n;
    }
    at::Tensor classes = at::cat(pos_classes), target = at::cat(targets);
    at::Tensor masks_loss = at::zeros({}, fopts);
    if (classes.size(0) > 0) {
      at::Tensor class_logits;  // [positives, S, S], each positive's ground-truth class
      if (p.mask_logits.defined()) {
        const at::Tensor logits = p.mask_logits.index_select(0, at::cat(pos_rows));
        const int64_t side = logits.size(2);
        class_logits = logits.gather(1, classes.view({-1, 1, 1, 1}).expand({-1, 1, side, side})).squeeze(1);
      } else if (is_training() && p.box_classifier_features.defined()) {
        class_logits = network->class_mask_logits(p.box_classifier_features.index_select(0, at::cat(pos_rows)), classes);
      } else {
        class_logits = network->class_mask_logits(network->mask_features(p.features, boxes_to_rois(pos_boxes)), classes);
      }
      masks_loss = mask_loss(class_logits, target);
    }
    masks_loss = masks_loss * o.second_stage_mask_loss_weight;
    result.parts.push_back({"second_stage_mask_loss", masks_loss});
    result.total = result.total + masks_loss;
  }
  return result;
}

std::vector<Boxes> FasterRcnnImpl::postprocess(const FasterRcnnPredictions& p, const Batch& batch) {
  const auto& o = options_;
  const int64_t batch_size = batch.images.size(0);
  const int64_t max_proposals = p.proposal_boxes.size(1);
  const int64_t num_stages = stages();
  std::vector<Boxes> out;
  int64_t first_row = 0;  // image b's first row in p.box_classifier_features
  for (int64_t b = 0; b < batch_size; ++b) {
    const int64_t n = p.num_proposals[b].item<int64_t>();
    at::Tensor proposals = p.proposal_boxes[b].slice(0, 0, n);
    if (num_stages == 1) {
      Boxes d(proposals.clone());
      d.scores = p.proposal_scores[b].slice(0, 0, n).clone();
      d.classes = at::zeros({n}, at::TensorOptions().dtype(at::kLong).device(proposals.device()));
      out.push_back(std::move(d));
      continue;
    }
    const double h = batch.image_sizes[b][0].item<double>(), w = batch.image_sizes[b][1].item<double>();
    at::Tensor logits = p.class_predictions_with_background.slice(0, b * max_proposals, b * max_proposals + n).detach();
    logits = upcast_low_precision(logits);  // fp32 scores under autocast
    at::Tensor scores = (sigmoid_scores(o) ? logits.sigmoid() : logits.softmax(1)).slice(1, 1);
    at::Tensor codes = p.refined_box_encodings.slice(0, b * max_proposals, b * max_proposals + n).detach();
    // codes [n, K, 4] against proposals [n, 4]: decode as [K, n, 4].
    at::Tensor boxes = decode_boxes(codes.transpose(0, 1), proposals, coder(o.second_stage_box_coder_scales)).transpose(0, 1);
    MultiClassNmsOptions nms;
    nms.score_threshold = o.postprocess.score_threshold;
    NmsChoice choice;
    choice.method = parse_nms_method(o.postprocess.nms);
    choice.iou_threshold = o.postprocess.nms_iou_threshold;
    choice.soft_sigma = o.postprocess.soft_nms_sigma;
    apply_nms_choice(choice, nms);
    nms.max_per_class = o.second_stage_max_detections_per_class;
    nms.max_total = o.postprocess.max_detections_per_image;
    nms.clip_window = Window{0, 0, w, h};
    at::Tensor masks;
    if (network->options.masks() && num_stages == 2 && n > 0) {
      // Two stages: masks predicted on the proposals travel through NMS with their boxes.
      at::Tensor crops = p.box_classifier_features.defined()
                             ? p.box_classifier_features.slice(0, first_row, first_row + n)
                             : mask_input(p.features, image_rois(proposals, b));
      masks = upcast_low_precision(run_graph("mask_head", {crops}).at(0).detach()).sigmoid().slice(1, 1);
    }
    first_row += n;
    Boxes d = multiclass_nms(boxes, scores, nms, masks);
    if (network->options.masks() && num_stages == 3) {
      // Three stages: features re-cropped at the final boxes for the mask head, which predicts
      // each box's detected class alone.
      const int64_t m = network->mask_size();
      d.masks = d.size() > 0 ? upcast_low_precision(
                                   class_mask_logits(mask_input(p.features, image_rois(d.boxes, b)), d.classes + 1)
                                       .detach())
                                   .sigmoid()
                             : at::zeros({0, m, m}, proposals.options());
    }
    if (o.output_detection_features) {
      at::Tensor pooled = network->roi_features(p.features, image_rois(d.boxes, b), network->options.box_pool_size());
      d.set_field("features", upcast_low_precision(pooled.detach()).mean({2, 3}));
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> FasterRcnnImpl::network_output_names() const {
  std::vector<std::string> names;
  if (network->options.c4()) {
    names.push_back("feature_c4");
  } else {
    for (int level = 2; level <= 6; ++level) names.push_back("feature_p" + std::to_string(level));
  }
  names.insert(names.end(), {"rpn_objectness", "rpn_box_regression"});
  return names;
}

std::vector<at::Tensor> FasterRcnnImpl::network_outputs(const at::Tensor& images) {
  if (exported_) {
    network->image_hw = {images.size(2), images.size(3)};  // the C4 crops normalise by it
    std::vector<at::Tensor> out = exported_("forward", {images});
    const size_t expected = network->strides().size() + 2;  // the maps, objectness, deltas
    DETSEG_CHECK(out.size() >= expected, "faster_rcnn: the exported network returned ", out.size(),
                 " tensors, expected ", expected);
    out.resize(expected);  // without the anchors
    return out;
  }
  std::vector<at::Tensor> out = network->features(images);
  auto [objectness, deltas] = network->rpn_head->forward(out);
  out.push_back(objectness);
  out.push_back(deltas);
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> FasterRcnnImpl::network_constants(int64_t height, int64_t width,
                                                                                  const at::Device& device) const {
  // Every stride-2 step (ResNet's convs and pools, P6's pool) rounds up: a level of stride s is
  // ceil(H / s) x ceil(W / s).
  std::vector<std::array<int64_t, 2>> sizes;
  for (int64_t s : network->strides()) sizes.push_back({(height + s - 1) / s, (width + s - 1) / s});
  return {{"anchors", anchors_for(sizes, device)}};
}

std::vector<ModelImpl::NetworkGraph> FasterRcnnImpl::network_graphs() const {
  const bool c4_masks = network->options.c4() && network->options.masks();
  std::vector<NetworkGraph> graphs{{"box_head", {"box_crops"}, {"class_logits", "box_regression"}}};
  if (c4_masks) graphs[0].output_names.push_back("region_features");
  if (network->options.masks())
    graphs.push_back({"mask_head", {c4_masks ? "region_features" : "mask_crops"}, {"mask_logits"}});
  return graphs;
}

std::vector<at::Tensor> FasterRcnnImpl::run_network_graph(const std::string& name,
                                                          const std::vector<at::Tensor>& inputs) {
  if (name == "forward") return network_outputs(inputs.at(0));
  if (name == "mask_head") return {network->mask_logits(inputs.at(0))};
  DETSEG_CHECK(name == "box_head", "faster_rcnn: no network graph named ", name);
  at::Tensor region = network->box_classifier_features(inputs.at(0));
  auto [logits, deltas] = network->box_predictions(region);
  std::vector<at::Tensor> out{logits, deltas.flatten(1)};  // torchvision's [K, (num_classes + 1) * 4]
  if (network->options.c4() && network->options.masks()) out.push_back(region);
  return out;
}

std::vector<at::Tensor> FasterRcnnImpl::network_graph_example(const std::string& name,
                                                              const std::vector<at::Tensor>& forward_outputs) {
  const std::vector<at::Tensor> features(forward_outputs.begin(), forward_outputs.end() - 2);
  const double h = static_cast<double>(network->image_hw[0]), w = static_cast<double>(network->image_hw[1]);
  // Three regions of different sizes (so FPN crops read several levels), on image 0.
  const at::Tensor rois = at::tensor({0.0, 0.0, 0.0, w, h, 0.0, w / 4, h / 4, w / 2, h / 2, 0.0, 2.0, 3.0, 18.0, 12.0},
                                     features[0].options().dtype(at::kFloat))
                              .view({3, 5});
  const at::Tensor box_crops = network->roi_features(features, rois, network->options.box_pool_size());
  if (name == "box_head") return {box_crops};
  if (network->options.c4()) return {network->box_classifier_features(box_crops)};
  return {network->roi_features(features, rois, network->options.mask_pool_size())};
}

std::vector<at::Tensor> FasterRcnnImpl::run_graph(const std::string& name, const std::vector<at::Tensor>& inputs) {
  return exported_ ? exported_(name, inputs) : run_network_graph(name, inputs);
}

at::Tensor FasterRcnnImpl::mask_input(const std::vector<at::Tensor>& features, const at::Tensor& rois) {
  if (!exported_ || !network->options.c4()) return network->mask_features(features, rois);
  return exported_("box_head", {network->roi_features(features, rois, 0)}).at(2);
}

at::Tensor FasterRcnnImpl::class_mask_logits(const at::Tensor& mask_input, const at::Tensor& channels) {
  if (!exported_) return network->class_mask_logits(mask_input, channels);
  // The exported head predicts every class; keep each RoI's own.
  const at::Tensor all = exported_("mask_head", {mask_input}).at(0);
  return all.gather(1, channels.view({-1, 1, 1, 1}).expand({-1, 1, all.size(2), all.size(3)})).squeeze(1);
}

namespace {
std::vector<Boxes> to_original(std::vector<Boxes> dets, const Batch& batch, double threshold) {
  for (size_t b = 0; b < dets.size(); ++b) {
    Boxes& d = dets[b];
    d.boxes = geometry_invert_boxes(batch.geometries[b], d.boxes);
    if (d.masks.defined()) {
      const int64_t h = batch.original_sizes[static_cast<int64_t>(b)][0].item<int64_t>();
      const int64_t w = batch.original_sizes[static_cast<int64_t>(b)][1].item<int64_t>();
      d.masks = paste_masks(d.masks, d.boxes, h, w, threshold);
    }
  }
  return dets;
}
}  // namespace

ModelLosses FasterRcnnImpl::losses(const Batch& batch) {
  auto predicted = [&] {
    DETSEG_PROFILE_SCOPE("detseg::network_and_sampling");  // proposals and the second stage's samples
    return predict(batch);
  }();
  DETSEG_PROFILE_SCOPE("detseg::loss");
  return loss(predicted, batch);
}

std::vector<Boxes> FasterRcnnImpl::detect(const Batch& batch) {
  FasterRcnnPredictions p = predict(batch);
  return to_original(postprocess(p, batch), batch, options_.mask_threshold);
}

std::pair<ModelLosses, std::vector<Boxes>> FasterRcnnImpl::losses_and_detect(const Batch& batch) {
  FasterRcnnPredictions p = predict(batch);
  std::vector<Boxes> dets = postprocess(p, batch);
  ModelLosses l = loss(p, batch, dets);
  return {l, to_original(std::move(dets), batch, options_.mask_threshold)};
}

at::Tensor paste_masks(const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
                       double threshold) {
  const int64_t n = masks.size(0);
  at::Tensor out = at::zeros({n, height, width}, at::kByte);
  if (n == 0) return out;
  const int64_t m = masks.size(-1);
  // Pad the grid by one cell and grow the box by the same fraction (torchvision's expand_masks).
  at::Tensor padded = at::constant_pad_nd(masks.to(at::kFloat).cpu(), {1, 1, 1, 1}, 0);
  const double scale = static_cast<double>(m + 2) / static_cast<double>(m);
  at::Tensor b = boxes.to(at::kFloat).cpu();
  for (int64_t i = 0; i < n; ++i) {
    const double x1 = b[i][0].item<double>(), y1 = b[i][1].item<double>();
    const double x2 = b[i][2].item<double>(), y2 = b[i][3].item<double>();
    const double cx = (x1 + x2) / 2, cy = (y1 + y2) / 2, hw = (x2 - x1) / 2 * scale, hh = (y2 - y1) / 2 * scale;
    const int64_t bx1 = static_cast<int64_t>(cx - hw), by1 = static_cast<int64_t>(cy - hh);
    const int64_t bx2 = static_cast<int64_t>(cx + hw), by2 = static_cast<int64_t>(cy + hh);
    const int64_t bw = std::max<int64_t>(bx2 - bx1 + 1, 1), bh = std::max<int64_t>(by2 - by1 + 1, 1);
    at::Tensor resized = at::upsample_bilinear2d(padded[i].view({1, 1, m + 2, m + 2}), {bh, bw}, false)[0][0];
    const int64_t ix1 = std::max<int64_t>(bx1, 0), iy1 = std::max<int64_t>(by1, 0);
    const int64_t ix2 = std::min<int64_t>(bx2 + 1, width), iy2 = std::min<int64_t>(by2 + 1, height);
    if (ix2 <= ix1 || iy2 <= iy1) continue;
    out[i].slice(0, iy1, iy2).slice(1, ix1, ix2).copy_(
        (resized.slice(0, iy1 - by1, iy2 - by1).slice(1, ix1 - bx1, ix2 - bx1) >= threshold).to(at::kByte));
  }
  return out;
}

}  // namespace detseg

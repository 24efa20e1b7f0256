// Implements: the pipeline config's single declaration (visit_config) and the three visitors that
// walk it: YAML reader with validation, YAML writer, Markdown reference writer.
#include "detseg/config/config.h"
#include "detseg/config/registry.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/yaml.h"
#include "detseg/hub/sha256.h"
#include "detseg/hub/weights_cache.h"

namespace detseg {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What a field accepts beyond its type.
struct Check {
  double min = -kInf;
  double max = kInf;
  std::vector<std::string> one_of;  // allowed strings (empty: any)
  bool is_path = false;             // resolved against the config file's folder
  size_t min_items = 0;             // lists: how many values
  size_t max_items = SIZE_MAX;
  bool url_ok = false;              // with is_path: a URL ("scheme://...") is kept as it is
  bool (*accepts)(const std::string&) = nullptr;  // strings: what else a non-empty value must pass
  const char* expected = "";                      // and what it is, for the error
};
Check range(double lo, double hi = kInf) { return Check{lo, hi, {}, false}; }
Check one_of(std::vector<std::string> names) { return Check{-kInf, kInf, std::move(names), false}; }
Check path() { return Check{-kInf, kInf, {}, true}; }
Check any() { return Check{}; }
Check url_or_path() {
  Check c = path();
  c.url_ok = true;
  return c;
}
Check sha256_prefix() {
  Check c;
  c.accepts = is_sha256_prefix;
  c.expected = "8 to 64 hex digits (a SHA-256 or its start)";
  return c;
}
// A list of `lo`..`hi` values, each passing `each`.
Check items(size_t lo, size_t hi, Check each) {
  each.min_items = lo;
  each.max_items = hi;
  return each;
}

// ---------------------------------------------------------------------------------------------
// The declaration: every key, in file order, with its check and meaning. Defaults live in the
// structs (config.h). To add a key: a member in config.h and one v.field line here.

template <class V>
void visit_input(V& v, InputConfig& c) {
  v.field("format", c.format, one_of({"coco", "voc", "yolo", "seg_folder"}),
          "Dataset format: COCO instances JSON, Pascal VOC folder, YOLO data.yaml (Ultralytics layout), or "
          "image+label-PNG folder");
  v.field("annotations", c.annotations, path(),
          "COCO JSON file, VOC folder (Annotations/, JPEGImages/), YOLO data.yaml, or segmentation list/folder");
  v.field("images", c.images, path(), "Image folder (COCO file_name is relative to it)");
  v.field("split", c.split, any(),
          "VOC: use ImageSets/Main/<split>.txt; YOLO: the data.yaml key of the images (default: train for "
          "train_input, val for eval_input)");
  v.field("label_map", c.label_map, path(),
          "Class names in label order (one per line, `id name` lines, or an OD API .pbtxt): orders the classes, "
          "renames a COCO category by id, refuses a class it does not list (docs/data.md)");
  v.field("box_policy", c.box_policy, one_of({"clip", "drop"}),
          "Boxes outside the image are clipped or dropped; degenerate boxes are always dropped and counted");
  v.field("bad_images", c.bad_images, one_of({"stop", "skip"}),
          "An image that cannot be used (missing, not an image, corrupt, a JPEG with over 5% of its rows lost): "
          "stop with its name, or skip it (left out, each named in a warning and all listed at the end); the same "
          "in training and evaluation. `detseg check-data` lists them all");
  v.field("require_boxes", c.require_boxes, any(),
          "Training: refuse a set in which no box is usable (false: train on background alone)");
  v.field("hflip", c.hflip, any(),
          "Random horizontal flip (training); older form of a random_horizontal_flip entry in augment");
  v.field("scale_min", c.scale_min, range(0.05, 10),
          "Random scale jitter, lower bound (1.0: off); older form of the sizing step's scale_min in augment");
  v.field("scale_max", c.scale_max, range(0.05, 10),
          "Random scale jitter, upper bound; older form of the sizing step's scale_max in augment");
  v.field("augment", c.augment, any(),
          "Training: the augmentation steps, in order, each `- name: {param: value, ...}` (optional `probability`: "
          "the chance it runs); the step table below and docs/data.md. Left out: random_horizontal_flip when "
          "hflip, then the model's sizing step (scale_min/max); a list without a sizing step gets the model's "
          "appended; a list over a _base_ (or by --set) replaces the hflip and scale_* it set");
  v.field("num_workers", c.num_workers, range(0, 64), "Loader worker threads (0: load in the caller)");
  v.field("prefetch", c.prefetch, range(1, 1024), "Batches prepared ahead");
  v.field("sample_1_of_n", c.sample_1_of_n, range(1), "Use every n-th image (evaluation)");
  v.field("max_images", c.max_images, range(0), "Use at most this many images (0: all)");
  v.field("void_values", c.void_values, items(0, 256, range(0, 255)),
          "seg_folder: raw label values meaning unlabelled, mapped to the ignore label (CamVid: [11])");
}

template <class V>
void visit_deeplab(V& v, DeepLabConfig& c) {
  v.field("output_stride", c.output_stride, range(8, 32), "Backbone output stride: 8, 16 or 32 (atrous convolution beyond it)");
  v.field("aspp_channels", c.aspp_channels, range(8, 4096), "ASPP width (rates 6/12/18 at stride 16, doubled at 8)");
  v.field("aspp_dropout", c.aspp_dropout, range(0, 0.99), "Dropout after the ASPP projection (training)");
  v.field("image_pooling", c.image_pooling, any(),
          "ASPP image-level branch (DeepLab's add_image_level_feature); its batch norm needs batches of 3+ images");
  v.field("low_level_channels", c.low_level_channels, range(0, 1024),
          "Decoder projection of the stride-4 features (48); 0: no decoder (DeepLabv3)");
  v.field("decoder_channels", c.decoder_channels, range(8, 4096), "Decoder 3x3 conv width");
  v.field("head_conv", c.head_conv, any(),
          "deeplabv3: a 3x3 conv + batch norm + ReLU between the ASPP and the classifier, as torchvision's "
          "DeepLabHead (its safetensors export then loads into torchvision's deeplabv3_resnet*)");
  v.field("crop_size", c.crop_size, range(16, 4096), "Square training crop (padded with the ignore label)");
  v.field("scale_step", c.scale_step, range(0, 10),
          "Training random scale in train_input.scale_min..scale_max by this step (0: continuous)");
  v.field("ignore_label", c.ignore_label, range(0, 65535), "Label the loss and metrics ignore (void and padding map to it)");
  v.field("loss_weight", c.loss_weight, range(0, 1e6), "Weight of the softmax cross-entropy");
  v.field("class_weights", c.class_weights, items(0, 4096, range(0, 1e6)),
          "Per-class loss weights, one per class (e.g. median-frequency balancing; docs/models.md); empty: all 1");
  v.field("upsample_logits", c.upsample_logits, any(),
          "Upsample logits to the labels (bilinear, aligned corners); false: downsample labels (nearest)");
  v.field("top_k_percent_pixels", c.top_k_percent_pixels, range(1e-6, 1), "Hard pixel mining: fraction of pixels kept (1: all)");
  v.field("hard_example_mining_step", c.hard_example_mining_step, range(0),
          "Steps over which mining ramps from all pixels to top_k_percent_pixels (0: at once)");
  v.field("last_layers", c.last_layers, any(), "Parameter name parts of the last layers (multiplier, initialize_last_layer)");
  v.field("gradient_multipliers", c.gradient_multipliers, any(),
          "DeepLab's multipliers: biases x2, last layers x last_layer_gradient_multiplier (added to train.gradient_multipliers)");
  v.field("last_layer_gradient_multiplier", c.last_layer_gradient_multiplier, range(0, 1e6), "Gradient multiplier of the last layers");
  v.field("initialize_last_layer", c.initialize_last_layer, any(),
          "Load the last layers from train.fine_tune.checkpoint too (false: they stay freshly initialised)");
  v.field("eval_scales", c.eval_scales, items(1, 16, range(0.05, 10)), "Evaluation input scales; probabilities are averaged");
  v.field("eval_flip", c.eval_flip, any(), "Also evaluate mirrored inputs and average");
}

template <class V>
void visit_faster_rcnn(V& v, FasterRcnnConfig& c) {
  v.field("number_of_stages", c.number_of_stages, range(1, 3),
          "1: RPN only (class-agnostic proposals are the detections); 2: + box classifier; 3: + masks re-cropped at "
          "the final boxes (inference; training runs 2)");
  v.field("feature_extractor", c.feature_extractor, one_of({"fpn", "c4"}),
          "fpn: ResNet + FPN P2-P6 with RoIAlign (torchvision's layout); c4: the reference's ResNet C4 (RPN on layer3, "
          "crop_and_resize + max-pool, layer4 as the box classifier; mask_rcnn's mask head reads layer4's region features)");
  v.field("initial_crop_size", c.initial_crop_size, range(1, 256), "c4: crop_and_resize size of each region");
  v.field("maxpool_kernel_size", c.maxpool_kernel_size, range(1, 16), "c4: max-pool kernel after the crop");
  v.field("maxpool_stride", c.maxpool_stride, range(1, 16), "c4: max-pool stride after the crop");
  v.field("first_stage_anchor_sizes", c.first_stage_anchor_sizes, items(1, 5, range(1, 4096)),
          "Anchor base size per pyramid level P2..P6 (5 values; torchvision: 32..512)");
  v.field("first_stage_anchor_scales", c.first_stage_anchor_scales, items(1, 16, range(0.01, 100)), "Anchor scales relative to the base size");
  v.field("first_stage_anchor_aspect_ratios", c.first_stage_anchor_aspect_ratios, items(1, 16, range(0.01, 100)),
          "Anchor width/height ratios, in the order of the RPN outputs (torchvision's order: 2, 1, 0.5)");
  v.field("first_stage_clip_anchors_to_image", c.first_stage_clip_anchors_to_image, any(),
          "Training: clip anchors to the image instead of pruning those that leave it");
  v.field("first_stage_box_predictor_kernel_size", c.first_stage_box_predictor_kernel_size, range(1, 15),
          "RPN conv kernel size (odd)");
  v.field("first_stage_box_predictor_depth", c.first_stage_box_predictor_depth, range(1, 4096), "RPN conv output depth");
  v.field("first_stage_atrous_rate", c.first_stage_atrous_rate, range(1, 64), "RPN conv atrous (dilation) rate");
  v.field("first_stage_matched_threshold", c.first_stage_matched_threshold, range(0, 1),
          "RPN: IoU at or above which an anchor is positive (each box also gets its best anchor)");
  v.field("first_stage_unmatched_threshold", c.first_stage_unmatched_threshold, range(0, 1),
          "RPN: IoU below which an anchor is negative; between the two it is ignored");
  v.field("first_stage_minibatch_size", c.first_stage_minibatch_size, range(1, 100000), "RPN anchors sampled per image for the loss");
  v.field("first_stage_positive_balance_fraction", c.first_stage_positive_balance_fraction, range(0, 1),
          "Largest fraction of positives in the RPN minibatch");
  v.field("first_stage_nms_score_threshold", c.first_stage_nms_score_threshold, range(0, 1), "Proposals scoring at or below this are dropped");
  v.field("first_stage_nms_iou_threshold", c.first_stage_nms_iou_threshold, range(0, 1), "Proposal NMS IoU threshold");
  v.field("first_stage_pre_nms_top_k", c.first_stage_pre_nms_top_k, range(0),
          "Best-scoring anchors kept before proposal NMS (0: all, as the reference)");
  v.field("first_stage_max_proposals", c.first_stage_max_proposals, range(1, 100000), "Proposals kept per image after NMS");
  v.field("first_stage_localization_loss_weight", c.first_stage_localization_loss_weight, range(0, 1e6), "RPN box loss weight");
  v.field("first_stage_objectness_loss_weight", c.first_stage_objectness_loss_weight, range(0, 1e6), "RPN objectness loss weight");
  v.field("first_stage_box_coder_scales", c.first_stage_box_coder_scales, items(4, 4, range(1e-6, 1e6)),
          "RPN box coder scale factors (y, x, h, w); torchvision's RPN: 1, 1, 1, 1");
  v.field("second_stage_batch_size", c.second_stage_batch_size, range(1, 100000),
          "Proposals sampled per image for the box classifier in training");
  v.field("second_stage_balance_fraction", c.second_stage_balance_fraction, range(0, 1),
          "Largest fraction of positives among the sampled proposals");
  v.field("second_stage_matched_threshold", c.second_stage_matched_threshold, range(0, 1),
          "Box classifier: IoU at or above which a proposal is positive (below: background)");
  v.field("second_stage_add_groundtruth_proposals", c.second_stage_add_groundtruth_proposals, any(),
          "Training: add the ground-truth boxes to the proposals before sampling (torchvision does; the reference not)");
  v.field("second_stage_box_coder_scales", c.second_stage_box_coder_scales, items(4, 4, range(1e-6, 1e6)),
          "Box classifier coder scale factors (y, x, h, w)");
  v.field("second_stage_classification_loss", c.second_stage_classification_loss, one_of({"softmax", "sigmoid"}),
          "Box classifier loss and score conversion");
  v.field("share_box_across_classes", c.share_box_across_classes, any(), "One box encoding for all classes instead of one per class");
  v.field("second_stage_localization_loss_weight", c.second_stage_localization_loss_weight, range(0, 1e6), "Box classifier box loss weight");
  v.field("second_stage_classification_loss_weight", c.second_stage_classification_loss_weight, range(0, 1e6),
          "Box classifier classification loss weight");
  v.field("second_stage_mask_loss_weight", c.second_stage_mask_loss_weight, range(0, 1e6), "Mask loss weight (mask_rcnn)");
  v.field("second_stage_max_detections_per_class", c.second_stage_max_detections_per_class, range(1, 100000),
          "Detections kept per class by the final NMS");
  v.field("hard_example_miner_num_examples", c.hard_example_miner_num_examples, range(0, 100000),
          "Second stage: >0 replaces proposal sampling by hard-example mining of this many proposals per image");
  v.field("hard_example_miner_iou_threshold", c.hard_example_miner_iou_threshold, range(0, 1), "Hard-example miner NMS IoU");
  v.field("representation_size", c.representation_size, range(1, 65536), "Box head (two fully connected layers) width");
  v.field("box_pool_size", c.box_pool_size, range(1, 64), "RoIAlign output size for the box head");
  v.field("mask_pool_size", c.mask_pool_size, range(1, 64), "fpn: RoIAlign output size for the mask head (masks are twice this); c4 ignores it: masks are twice "
          "the max-pooled crop, (initial_crop_size - maxpool_kernel_size) / maxpool_stride + 1");
  v.field("mask_head_depth", c.mask_head_depth, range(1, 4096), "fpn: channels of the mask head's 4 convs and deconv (torchvision: 256); c4: of the deconv on layer4's "
          "region features (detectron2: 256)");
  v.field("mask_threshold", c.mask_threshold, range(0, 1), "Pasted mask probability at or above which a pixel is in the mask");
  v.field("output_detection_features", c.output_detection_features, any(),
          "Attach mean-pooled RoI features to each detection (Boxes field \"features\")");
}

template <class V>
void visit_model(V& v, ModelConfig& c) {
  // Both lists come from the part tables (config/parts.def, and backbones an application added).
  std::vector<std::string> types, backbone_names;
  std::string takes;
  for (const ModelTypeInfo& t : model_types()) {
    types.push_back(t.type);
    if (t.families.empty()) continue;
    takes += (takes.empty() ? "" : "; ") + t.type + ": ";
    for (size_t i = 0; i < t.families.size(); ++i) takes += (i ? ", " : "") + (t.families[i] == "*" ? "any" : t.families[i]);
  }
  for (const BackboneInfo& b : backbones()) backbone_names.push_back(b.name);
  v.field("type", c.type, one_of(types), "Meta-architecture");
  v.field("num_classes", c.num_classes, range(1, 100000), "Number of object classes (no background)");
  const std::string backbone_doc = "Backbone network, by family (" + takes + "; efficientdet picks its own)";
  v.field("backbone", c.backbone, one_of(backbone_names), backbone_doc.c_str());
  v.field("efficientdet", c.efficientdet, one_of({"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"}),
          "EfficientDet size: sets backbone, BiFPN width/depth and head depth per the paper");
  v.field("pretrained", c.pretrained, url_or_path(),
          "Backbone weights (torchvision's ImageNet .pth): a URL (http, https, file; downloaded once into "
          "$DETSEG_HOME/weights, default ~/.cache/detseg/weights, resumed when cut) or a path; loaded when training "
          "starts with no checkpoint in the model dir and no train.fine_tune.checkpoint (docs/pretrained.md); "
          "empty: none");
  v.field("pretrained_sha256", c.pretrained_sha256, sha256_prefix(),
          "SHA-256 of model.pretrained, or its first 8+ hex digits; empty: the -<hex>. in a torchvision file name "
          "(resnet50-0676ba61.pth), required for other URLs");
  v.field("image_size", c.image_size, range(32, 4096),
          "Square network input size in pixels with resizer fixed (EfficientDet: a multiple of 2^max_level)");
  v.field("resizer", c.resizer, one_of({"fixed", "keep_aspect"}),
          "Detectors' input resize: fixed: each image fitted into an image_size square, aspect kept, padded; "
          "keep_aspect: shorter side to min_dimension unless the longer would pass max_dimension, each batch padded "
          "to its largest image rounded up to a multiple of 32 (EfficientDet: 2^max_level)");
  v.field("min_dimension", c.min_dimension, range(16, 8192), "keep_aspect: target of the shorter image side");
  v.field("max_dimension", c.max_dimension, range(16, 8192), "keep_aspect: limit of the longer image side");
  v.field("min_level", c.min_level, range(2, 7), "Lowest pyramid level");
  v.field("max_level", c.max_level, range(3, 8), "Highest pyramid level");
  v.field("num_scales", c.num_scales, range(1, 8), "Anchor scales per octave");
  v.field("aspect_ratios", c.aspect_ratios, items(1, 16, range(0.01, 100)), "Anchor aspect ratios");
  v.field("anchor_scale", c.anchor_scale, range(0.1, 64), "Anchor size relative to the level stride");
  std::vector<std::string> neck_names = {""}, head_names = {""};
  std::string neck_doc = "Dense detectors' neck, C3-C5 to P3-P7; empty: the model's own (", head_doc =
      "Dense detectors' class and box subnets; empty: the model's own (";
  for (const ModelTypeInfo& t : model_types()) {
    if (t.neck.empty()) continue;
    neck_doc += (neck_doc.back() == '(' ? "" : ", ") + t.type + "'s " + t.neck;
    head_doc += (head_doc.back() == '(' ? "" : ", ") + t.type + "'s " + t.head;
  }
  neck_doc += "). ";
  head_doc += "). ";
  for (const PartInfo& n : necks()) {
    neck_names.push_back(n.name);
    neck_doc += n.name + ": " + n.description + "; ";
  }
  for (const PartInfo& h : dense_heads()) {
    head_names.push_back(h.name);
    head_doc += h.name + ": " + h.description + "; ";
  }
  neck_doc.resize(neck_doc.size() - 2);
  head_doc.resize(head_doc.size() - 2);
  v.field("neck", c.neck, one_of(neck_names), neck_doc.c_str());
  v.field("head", c.head, one_of(head_names), head_doc.c_str());
  v.field("fpn_channels", c.fpn_channels, range(8, 2048), "Neck width of RetinaNet (EfficientDet: per model.efficientdet)");
  v.field("head_norm", c.head_norm, one_of({"none", "group_norm"}),
          "RetinaNet head convs: none (torchvision's retinanet_resnet50_fpn) or group_norm (32 groups, "
          "retinanet_resnet50_fpn_v2; trains much faster from scratch)");
  v.field("frozen_batch_norm", c.frozen_batch_norm, any(), "Backbone batch norm frozen (statistics and affine)");
  v.field("batch_norm_momentum", c.batch_norm_momentum, range(0.0001, 1),
          "EfficientDet's batch norm momentum (also of a bifpn neck or efficientdet head in RetinaNet), torch's "
          "convention (new = (1 - m) old + m batch): the reference's "
          "0.01 (TF decay 0.99) suits long runs; ~0.1 lets a short from-scratch run's statistics keep up with its "
          "weights");
  v.field("trainable_backbone_stages", c.trainable_backbone_stages, range(0, 5),
          "ResNet stages trained, counted from the top (torchvision's trainable_backbone_layers)");
  v.field("matched_threshold", c.matched_threshold, range(0, 1), "IoU at or above which an anchor is positive");
  v.field("unmatched_threshold", c.unmatched_threshold, range(0, 1),
          "IoU below which an anchor is negative; between the two it is ignored");
  v.field("focal_alpha", c.focal_alpha, range(0, 1), "Focal loss alpha");
  v.field("focal_gamma", c.focal_gamma, range(0, 10), "Focal loss gamma");
  std::vector<std::string> box_loss_names;
  std::string box_loss_doc = "RetinaNet/EfficientDet box regression loss:";
  std::string weights_doc = "Weight of the box loss in the total; -1: the box loss's own (";
  for (const BoxLossInfo& b : box_losses()) {
    box_loss_names.push_back(b.name);
    box_loss_doc += " " + b.name + ": " + b.description + ";";
    weights_doc += (box_loss_names.size() > 1 ? ", " : "") + b.name + " " + str(b.default_weight);
  }
  box_loss_doc.back() = ' ';
  box_loss_doc += "(docs/models.md)";
  weights_doc += ")";
  v.field("box_loss", c.box_loss, one_of(box_loss_names), box_loss_doc.c_str());
  v.field("huber_delta", c.huber_delta, range(1e-6, 10), "Huber box loss delta");
  v.field("box_loss_weight", c.box_loss_weight, range(-1, 1e6), weights_doc.c_str());
  v.field("pixel_mean", c.pixel_mean, items(3, 3, range(0, 1)), "Per-channel mean of RGB in [0,1]");
  v.field("pixel_std", c.pixel_std, items(3, 3, range(1e-6, 10)), "Per-channel std of RGB in [0,1]");
  v.section("deeplab", [&] { visit_deeplab(v, c.deeplab); });
  v.section("faster_rcnn", [&] { visit_faster_rcnn(v, c.faster_rcnn); });
}

template <class V>
void visit_postprocess(V& v, PostprocessConfig& c) {
  v.field("max_detection_points", c.max_detection_points, range(0),
          "Candidates kept across levels and classes before NMS (0: every anchor with its best class)");
  v.field("score_threshold", c.score_threshold, range(0, 1), "Drop detections scoring below this");
  v.field("nms_iou_threshold", c.nms_iou_threshold, range(0, 1), "Per-class NMS IoU threshold");
  v.field("max_detections_per_image", c.max_detections_per_image, range(1, 100000), "Detections kept per image");
  v.field("nms", c.nms, one_of({"per_class", "class_agnostic", "soft"}),
          "per_class: hard NMS within each class (torchvision's); class_agnostic: a box suppresses overlapping "
          "boxes of every class; soft: Gaussian soft-NMS per class (scores decay with overlap)");
  v.field("soft_nms_sigma", c.soft_nms_sigma, range(1e-6, 100), "soft: score *= exp(-IoU^2 / (2 sigma))");
  v.field("tile_size", c.tile_size, range(0, 65536),
          "predict: cut each image into tiles of this many pixels square, run each, merge the detections "
          "(`--tile`; 0: the whole image at once; docs/cli.md)");
  v.field("tile_overlap", c.tile_overlap, range(0, 0.9),
          "predict with tiles: neighbouring tiles overlap by this fraction of a tile (`--tile-overlap`)");
  v.field("tile_include_full_image", c.tile_include_full_image, any(),
          "predict with tiles: also run the whole image, resized as without tiles (finds objects larger than a tile)");
}

template <class V>
void visit_schedule(V& v, ScheduleOptions& c) {
  v.field("type", c.type,
          one_of({"constant", "stepwise", "cosine", "cosine_warmup", "polynomial", "step", "poly"}),
          "Learning-rate schedule (see docs/training.md)");
  v.field("learning_rate", c.learning_rate, range(0, 100), "Base learning rate");
  v.field("scale_by_batch", c.scale_by_batch, any(), "Multiply the rate by global_batch/64 as the reference does");
  v.field("warmup_steps", c.warmup_steps, range(0), "Linear warm-up steps");
  v.field("warmup_init", c.warmup_init, range(0, 100), "Learning rate at step 0 of the warm-up");
  v.field("drop_steps", c.drop_steps, items(0, 2, range(0)), "stepwise: steps of the x0.1 and x0.01 drops");
  v.field("power", c.power, range(0, 100), "polynomial/poly power");
  v.field("decay_factor", c.decay_factor, range(0, 1), "step: factor per staircase step");
  v.field("decay_steps", c.decay_steps, range(1), "step: staircase period in steps");
  v.field("slow_start_steps", c.slow_start_steps, range(0), "DeepLab slow start: steps at the slow-start rate");
  v.field("slow_start_learning_rate", c.slow_start_learning_rate, range(0, 100), "DeepLab slow-start rate");
  v.field("slow_start_burnin", c.slow_start_burnin, one_of({"none", "linear"}),
          "Slow start: constant at the slow-start rate, or a linear ramp from it to the schedule");
}

template <class V>
void visit_optimizer(V& v, OptimizerOptions& c) {
  v.field("type", c.type, one_of({"momentum", "sgd", "adam", "adamw", "rmsprop"}), "Optimizer");
  v.field("momentum", c.momentum, range(0, 1), "Momentum (momentum, rmsprop)");
  v.field("weight_decay", c.adamw_weight_decay, range(0, 1), "Decoupled weight decay (adamw) / optimizer decay");
  v.field("beta1", c.beta1, range(0, 1), "Adam beta1");
  v.field("beta2", c.beta2, range(0, 1), "Adam beta2");
  v.field("epsilon", c.epsilon, range(0, 1), "Adam/RMSProp epsilon");
}

template <class V>
void visit_fine_tune(V& v, FineTuneOptions& c) {
  v.field("checkpoint", c.checkpoint, path(), "Checkpoint to start from (ours or a torchvision .pth); empty: none");
  v.field("type", c.type, one_of({"detection", "classification"}),
          "detection: all matching variables; classification: backbone only");
  v.field("exclude", c.exclude_pattern, any(), "Regex of parameter names not to load (e.g. the last layers)");
  v.field("scope_map", c.scope_map, any(), "Name prefix mapping ours=theirs, applied before matching");
  v.field("all_variables", c.load_all_detection_vars, any(),
          "detection: load every variable (true) or only the backbone (false, the reference's default)");
  v.field("skip_missing", c.skip_missing, any(), "Skip variables the checkpoint lacks instead of failing");
  v.field("skip_mismatched", c.skip_mismatched, any(), "Skip variables whose shape differs instead of failing");
  v.field("classes", c.classes, one_of({"match", "drop"}),
          "When the checkpoint's class layers are loaded: match (the data's classes are the checkpoint's, any order, "
          "matched by name) or drop (the class layers start afresh)");
  v.field("class_map", c.class_map, any(),
          "Class renames ours=theirs applied before matching by name (e.g. car=vehicle)");
}

template <class V>
void visit_distributed(V& v, DistributedConfig& c) {
  v.field("timeout_s", c.timeout_s, range(1, 86400),
          "Rendezvous and collective timeout: a dead or hung worker stops the others within it");
  v.field("bucket_mb", c.bucket_mb, range(0.001, 4096), "Gradient all-reduce bucket size in MB");
  v.field("sync_batch_norm", c.sync_batch_norm, any(),
          "Trainable batch norm normalises with the statistics of the global batch (all ranks), not each rank's");
  v.field("backend", c.backend, one_of({"auto", "gloo", "nccl"}),
          "Collectives on CUDA tensors: nccl, or gloo through the host; auto is nccl on GPUs (CPU tensors: gloo)");
}

template <class V>
void visit_profile(V& v, ProfileConfig& c) {
  v.field("steps", c.steps, range(0, 100000),
          "Profile this many steps: op table and Chrome trace into model_dir/profile/ (0: off)");
  v.field("warmup", c.warmup, range(0), "Steps of this run (resumed or not) before the profiled ones");
}

template <class V>
void visit_train(V& v, TrainConfig& c) {
  v.field("batch_size", c.batch_size, range(1, 4096), "Images per step (per process)");
  v.field("num_steps", c.num_steps, range(1), "Training steps");
  v.field("seed", c.seed, range(0), "Seed for initialisation, shuffling and augmentation");
  v.section("schedule", [&] { visit_schedule(v, c.schedule); });
  v.section("optimizer", [&] { visit_optimizer(v, c.optimizer); });
  v.field("l2_weight", c.optimizer.l2_weight, range(0, 1), "L2 regularisation weight, reported as its own loss");
  v.field("l2_pattern", c.optimizer.l2_pattern, any(),
          "Regex of parameter names the L2 loss covers (tensors of 2+ dims)");
  v.field("freeze_pattern", c.optimizer.freeze_pattern, any(), "Regex of parameter names not trained");
  v.field("gradient_multipliers", c.optimizer.multipliers, any(),
          "\"regex=factor\" entries: matching parameters' gradients are scaled (DeepLab: biases x2, last layers x10)");
  v.field("clip_gradients_norm", c.optimizer.clip_gradients_norm, range(0), "Clip gradients by global norm (0: off)");
  v.field("moving_average_decay", c.moving_average_decay, range(0, 1), "Weight EMA decay (0: off)");
  v.field("checkpoint_every", c.checkpoint_every, range(1), "Save a checkpoint every N steps (and at the end)");
  v.field("keep_checkpoints", c.keep_checkpoints, range(1), "Newest checkpoints kept");
  v.field("log_every", c.log_every, range(1), "Log losses, LR and speed every N steps");
  v.field("mixed_precision", c.mixed_precision, one_of({"none", "bf16", "fp16"}),
          "Forward pass under autocast in bf16 or fp16 (losses stay fp32); fp16 adds a dynamic loss scaler");
  v.section("fine_tune", [&] { visit_fine_tune(v, c.fine_tune); });
  v.section("distributed", [&] { visit_distributed(v, c.distributed); });
  v.section("profile", [&] { visit_profile(v, c.profile); });
}

template <class V>
void visit_eval(V& v, EvalConfig& c) {
  v.field("class_agnostic", c.class_agnostic, any(), "COCO evaluation ignoring classes (useCats=0)");
  v.field("batch_size", c.batch_size, range(1, 1024), "Images per evaluation batch");
  v.field("every_steps", c.every_steps, range(0), 
          "Evaluate the current (EMA) weights on eval_input every N training steps into model_dir/eval/ (0: only "
          "at the end of `detseg train`)");
  v.field("on_train", c.on_train, range(0),
          "Also evaluate the first N train_input images (unaugmented), logged as the set \"train\" (0: off)");
  std::vector<std::string> metrics = {""};
  std::string metric_doc;
  for (const EvaluatorInfo& e : evaluators()) {
    metrics.push_back(e.name);
    metric_doc += e.name + (e.label_maps ? " [segmenters]: " : " [detectors]: ") + e.description + "; ";
  }
  metric_doc += "empty: coco for detectors, miou for segmenters";
  v.field("metric", c.metric, one_of(metrics), metric_doc.c_str());
  v.field("voc_use_07_metric", c.voc_use_07_metric, any(),
          "metric voc: VOC2007's 11-point interpolated AP instead of the all-point area (VOC2010+)");
  v.field("pictures", c.pictures, any(),
          "Evaluation pictures (docs/evaluation.md): PR curves, confusion matrix, AP by size, the worst images, "
          "into eval/pictures-<step>/ by `detseg eval` and training's final-step evaluation; TensorBoard PR curves "
          "at every evaluation");
}

template <class V>
void visit_config(V& v, PipelineConfig& c) {
  v.field("device", c.device, any(),
          "auto | cpu | cuda | cuda:N (auto: cuda:LOCAL_RANK when a GPU is visible, else cpu); --device sets it");
  v.field("max_image_pixels", c.max_image_pixels, range(1, 1e12),
          "Images whose header claims more pixels are refused before decoding (PIL's decompression-bomb limit)");
  v.section("model", [&] { visit_model(v, c.model); });
  v.section("postprocess", [&] { visit_postprocess(v, c.postprocess); });
  v.section("train", [&] { visit_train(v, c.train); });
  v.section("train_input", [&] { visit_input(v, c.train_input); });
  v.section("eval", [&] { visit_eval(v, c.eval); });
  v.section("eval_input", [&] { visit_input(v, c.eval_input); });
  v.named_sections("eval_inputs", c.eval_inputs, [&](InputConfig& input) { visit_input(v, input); });
}

// ---------------------------------------------------------------------------------------------
// Reader: walks the YAML tree beside the declaration, checks each value, rejects unknown keys.

// Which file each key path ("train.batch_size", or a whole section "train") was read from, when it
// is not the config file itself (keys inherited through _base_).
using KeyOrigins = std::map<std::string, std::string>;
// The key paths given by --set, each with its whole "key=value" text (the last one of a key wins).
using Overrides = std::map<std::string, std::string>;

std::string quoted(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return "\"" + node.Scalar() + "\"";
  if (node.IsSequence()) return "a list";
  return "a mapping";
}

std::string describe_range(const Check& check) {
  if (check.min > -kInf && check.max < kInf) return str(" in [", check.min, ", ", check.max, "]");
  if (check.min > -kInf) return str(" >= ", check.min);
  if (check.max < kInf) return str(" <= ", check.max);
  return "";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// A one_of list as a user reads it: the empty choice shown as "".
std::string choices(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + (names[i].empty() ? "\"\"" : names[i]);
  return out;
}

bool parse_int(const std::string& text, int64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = value;
  return true;
}

bool parse_double(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (*end != '\0' || std::isnan(value)) return false;
  out = value;
  return true;
}

// train.gradient_multipliers entries are "regex=factor"; the last '=' splits, so the regex may
// hold one.
bool parse_gradient_multiplier(const std::string& text, GradientMultiplier& out) {
  auto eq = text.rfind('=');
  double factor = 0;
  if (eq == std::string::npos || eq == 0 || !parse_double(text.substr(eq + 1), factor) || !std::isfinite(factor) ||
      factor < 0)
    return false;
  out = GradientMultiplier{text.substr(0, eq), factor};
  return true;
}

// train.fine_tune.scope_map entries are "ours=theirs" name prefixes: {"^ours", "theirs"}.
bool parse_scope_rule(const std::string& text, ScopeRule& out) {
  auto eq = text.find('=');
  if (eq == std::string::npos) return false;
  out = ScopeRule{"^" + text.substr(0, eq), text.substr(eq + 1)};
  return true;
}

std::string format_scope_rule(const ScopeRule& r) {
  const bool anchored = !r.pattern.empty() && r.pattern[0] == '^';
  return (anchored ? r.pattern.substr(1) : r.pattern) + "=" + r.replacement;
}

// The shortest decimal that reads back as the same double, so a resolved config round-trips.
std::string format_gradient_multiplier(const GradientMultiplier& m) {
  std::ostringstream os;
  for (int precision = 6; precision <= 17; ++precision) {
    os.str("");
    os.precision(precision);
    os << m.factor;
    if (std::strtod(os.str().c_str(), nullptr) == m.factor) break;
  }
  return m.pattern + "=" + os.str();
}

class Reader {
 public:
  Reader(YAML::Node root, std::string source, Overrides overridden, KeyOrigins origins)
      : source_(std::move(source)), overridden_(std::move(overridden)), origins_(std::move(origins)) {
    stack_.push_back(Level{root, ""});
    check_mapping(root, "the top level");
  }

  template <class F>
  void section(const char* key, F body) {
    Level& level = stack_.back();
    level.seen.insert(key);
    YAML::Node child = lookup(level.node, key);
    std::string path = level.prefix + key;
    if (!child.IsDefined() || child.IsNull()) child = YAML::Node(YAML::NodeType::Map);
    check_mapping(child, path);
    stack_.push_back(Level{child, path + "."});
    body();
    reject_unknown(stack_.back());
    stack_.pop_back();
  }

  template <class T>
  void field(const char* key, T& value, const Check& check, const char* /*doc*/) {
    Level& level = stack_.back();
    level.seen.insert(key);
    const YAML::Node& const_map = level.node;  // const access never inserts
    YAML::Node node = const_map[key];
    if (!node.IsDefined()) return;  // absent: keep the default
    // `key:` with nothing after it (or --set key=) is a slip, not a request for the default.
    if (node.IsNull()) {
      // A null value has no position of its own (yaml-cpp marks the next token): name the key's line.
      for (const auto& item : level.node)
        if (item.first.IsScalar() && item.first.Scalar() == key) node = item.first;
      throw ConfigError(where(node, level.prefix + key) + level.prefix + key +
                        ": expected a value (remove the key to keep the default), got nothing");
    }
    read(node, level.prefix + key, value, check);
  }

  // `key: {name: {...}, name2: {...}}`: sections under names the user chooses, read in file order.
  template <class T, class F>
  void named_sections(const char* key, std::vector<std::pair<std::string, T>>& out, F body) {
    Level& level = stack_.back();
    level.seen.insert(key);
    YAML::Node child = lookup(level.node, key);
    const std::string path = level.prefix + key;
    if (!child.IsDefined() || child.IsNull()) return;
    check_mapping(child, path);
    out.clear();
    for (const auto& item : child) {
      const std::string name = item.first.Scalar();
      if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                              std::string::npos)
        throw ConfigError(where(item.first, path) + path + "." + name +
                          ": a set name uses letters, digits, '_' and '-' (it names files and metrics)");
      YAML::Node section = item.second;
      if (!section.IsDefined() || section.IsNull()) section = YAML::Node(YAML::NodeType::Map);
      check_mapping(section, path + "." + name);
      T value{};
      stack_.push_back(Level{section, path + "." + name + "."});
      body(value);
      reject_unknown(stack_.back());
      stack_.pop_back();
      out.emplace_back(name, std::move(value));
    }
  }

  void finish() { reject_unknown(stack_.front()); }

 private:
  struct Level {
    YAML::Node node;
    std::string prefix;
    std::set<std::string> seen = {};
  };

  static YAML::Node lookup(const YAML::Node& map, const char* key) {
    const YAML::Node& const_map = map;  // const access never inserts
    YAML::Node found = const_map[key];
    // A missing key yields an "invalid" node that throws on most uses: hand back a plain null.
    return found.IsDefined() ? found : YAML::Node();
  }

  std::string where(const YAML::Node& node, const std::string& path) const {
    if (const std::string* set = override_of(path)) return "--set " + *set + ": ";
    return location(file_of(path), node.Mark().line >= 0 ? node.Mark().line + 1 : 0);
  }

  // The --set text ("key=value") that gave `path` its value: one for the key itself, or for a
  // section or list above it ("model.pixel_mean[0]" from --set model.pixel_mean=[...]).
  const std::string* override_of(std::string path) const {
    for (;;) {
      auto it = overridden_.find(path);
      if (it != overridden_.end()) return &it->second;
      const size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos) return nullptr;
      path.resize(cut);
    }
  }

  // The file a key came from (with _base_, a key may come from a base config): the entry for the
  // key itself or for the nearest section above it.
  const std::string& file_of(std::string path) const {
    for (;;) {
      auto it = origins_.find(path);
      if (it != origins_.end()) return it->second;
      const size_t dot = path.rfind('.');
      if (dot == std::string::npos) return source_;
      path.resize(dot);
    }
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& expected) const {
    throw ConfigError(where(node, path) + path + ": expected " + expected + ", got " + quoted(node));
  }

  void check_mapping(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap()) fail(node, path, "a mapping of keys");
  }

  void reject_unknown(const Level& level) const {
    for (const auto& item : level.node) {
      std::string key = item.first.as<std::string>();
      if (level.seen.count(key)) continue;
      std::vector<std::string> known(level.seen.begin(), level.seen.end());
      throw ConfigError(where(item.first, level.prefix + key) + level.prefix + key +
                        ": unknown key (known here: " + join(known) + ")");
    }
  }

  void check_range(const YAML::Node& node, const std::string& path, double x, const Check& check,
                   const char* kind) const {
    // Written so that NaN (which compares false both ways) fails too.
    if (!(x >= check.min && x <= check.max)) fail(node, path, std::string(kind) + describe_range(check));
  }

  void read(const YAML::Node& node, const std::string& path, int64_t& out, const Check& check) const {
    int64_t x = 0;
    if (!node.IsScalar() || !parse_int(node.Scalar(), x)) fail(node, path, "an integer" + describe_range(check));
    check_range(node, path, static_cast<double>(x), check, "an integer");
    out = x;
  }
  void read(const YAML::Node& node, const std::string& path, double& out, const Check& check) const {
    double x = 0;
    if (!node.IsScalar() || !parse_double(node.Scalar(), x)) fail(node, path, "a number" + describe_range(check));
    check_range(node, path, x, check, "a number");
    out = x;
  }
  void read(const YAML::Node& node, const std::string& path, bool& out, const Check&) const {
    static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "on"};
    static const std::set<std::string> no = {"false", "False", "FALSE", "no", "off"};
    if (node.IsScalar() && yes.count(node.Scalar())) {
      out = true;
    } else if (node.IsScalar() && no.count(node.Scalar())) {
      out = false;
    } else {
      fail(node, path, "true or false");
    }
  }
  void read(const YAML::Node& node, const std::string& path, std::string& out, const Check& check) const {
    if (!node.IsScalar()) fail(node, path, "a string");
    out = node.Scalar();
    if (!check.one_of.empty()) {
      bool ok = false;
      for (const auto& name : check.one_of) ok = ok || name == out;
      if (!ok) fail(node, path, "one of " + choices(check.one_of));
    }
    if (check.accepts && !out.empty() && !check.accepts(out)) fail(node, path, check.expected);
    if (check.is_path && !out.empty() && !override_of(path) && !(check.url_ok && is_url(out)) &&
        std::filesystem::path(out).is_relative()) {
      std::string dir = std::filesystem::path(file_of(path)).parent_path().string();
      out = (std::filesystem::path(dir.empty() ? "." : dir) / out).lexically_normal().string();
    }
  }
  void read(const YAML::Node& node, const std::string& path, GradientMultiplier& out, const Check&) const {
    if (!node.IsScalar() || !parse_gradient_multiplier(node.Scalar(), out))
      fail(node, path, "\"regex=factor\" with a number >= 0 after the last '='");
  }
  void read(const YAML::Node& node, const std::string& path, ScopeRule& out, const Check&) const {
    if (!node.IsScalar() || !parse_scope_rule(node.Scalar(), out)) fail(node, path, "\"ours=theirs\"");
  }
  void read(const YAML::Node& node, const std::string& path, AugmentList& out, const Check&) const {
    if (!node.IsSequence()) fail(node, path, "a list of augmentation steps (`- name: {param: value}`)");
    AugmentList list;
    list.where = where(node, path);
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      list.steps.push_back(parse_augment_step(node[i], item, [&](const YAML::Node& n) { return where(n, item); }));
    }
    out = std::move(list);
  }
  template <class T>
  void read(const YAML::Node& node, const std::string& path, std::vector<T>& out, const Check& check) const {
    if (!node.IsSequence()) fail(node, path, "a list");
    if (node.size() < check.min_items || node.size() > check.max_items) {
      const std::string count = check.min_items == check.max_items ? str(check.min_items)
                                : check.max_items == SIZE_MAX    ? str(check.min_items, " or more")
                                                                 : str(check.min_items, " to ", check.max_items);
      throw ConfigError(where(node, path) + path + ": expected a list of " + count + " values, got " +
                        str(node.size()));
    }
    std::vector<T> values;
    for (size_t i = 0; i < node.size(); ++i) {
      T x{};
      read(node[i], path + "[" + std::to_string(i) + "]", x, check);
      values.push_back(x);
    }
    out = std::move(values);
  }

  std::string source_;
  Overrides overridden_;
  KeyOrigins origins_;
  std::vector<Level> stack_;
};

// ---------------------------------------------------------------------------------------------
// Writer (resolved config as YAML) and Markdown reference.

class Writer {
 public:
  Writer() { out_ << YAML::BeginMap; }
  template <class F>
  void section(const char* key, F body) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    body();
    out_ << YAML::EndMap;
  }
  template <class T>
  void field(const char* key, const T& value, const Check&, const char*) {
    out_ << YAML::Key << key << YAML::Value;
    write(value);
  }
  template <class T, class F>
  void named_sections(const char* key, std::vector<std::pair<std::string, T>>& sections, F body) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    for (auto& [name, value] : sections) {
      out_ << YAML::Key << name << YAML::Value << YAML::BeginMap;
      body(value);
      out_ << YAML::EndMap;
    }
    out_ << YAML::EndMap;
  }
  std::string text() {
    out_ << YAML::EndMap;
    return std::string(out_.c_str()) + "\n";
  }

 private:
  void write(int64_t x) { out_ << x; }
  void write(double x) { out_ << x; }
  void write(bool x) { out_ << x; }
  void write(const std::string& x) { out_ << YAML::DoubleQuoted << x; }
  void write(const GradientMultiplier& x) { write(format_gradient_multiplier(x)); }
  void write(const ScopeRule& x) { write(format_scope_rule(x)); }
  void write(const AugmentList& x) {
    out_ << (x.steps.empty() ? YAML::Flow : YAML::Block) << YAML::BeginSeq;  // none: `augment: []`
    for (const AugmentStep& step : x.steps) emit_augment_step(out_, step);
    out_ << YAML::EndSeq;
  }
  template <class T>
  void write(const std::vector<T>& xs) {
    out_ << YAML::Flow << YAML::BeginSeq;
    for (const auto& x : xs) write(x);
    out_ << YAML::EndSeq;
  }
  YAML::Emitter out_;
};

class Documenter {
 public:
  template <class F>
  void section(const char* key, F body) {
    prefix_.push_back(std::string(key) + ".");
    body();
    prefix_.pop_back();
  }
  // Documented once, as `key.<name>.field`.
  template <class T, class F>
  void named_sections(const char* key, std::vector<std::pair<std::string, T>>&, F body) {
    prefix_.push_back(std::string(key) + ".<name>.");
    T defaults{};
    body(defaults);
    prefix_.pop_back();
  }
  template <class T>
  void field(const char* key, const T& value, const Check& check, const char* doc) {
    std::string path;
    for (const auto& p : prefix_) path += p;
    rows_ << "| `" << path << key << "` | " << type_name(value) << " | `" << show(value) << "` | "
          << allowed(check) << " | " << doc << " |\n";
  }
  std::string text() const {
    return "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n" + rows_.str();
  }

 private:
  static const char* type_name(int64_t) { return "int"; }
  static const char* type_name(double) { return "float"; }
  static const char* type_name(bool) { return "bool"; }
  static const char* type_name(const std::string&) { return "string"; }
  static const char* type_name(const std::vector<double>&) { return "list of float"; }
  static const char* type_name(const std::vector<int64_t>&) { return "list of int"; }
  static const char* type_name(const std::vector<std::string>&) { return "list of string"; }
  static const char* type_name(const std::vector<GradientMultiplier>&) { return "list of string"; }
  static const char* type_name(const std::vector<ScopeRule>&) { return "list of string"; }
  static const char* type_name(const AugmentList&) { return "list of steps"; }
  static std::string show(int64_t x) { return std::to_string(x); }
  static std::string show(double x) { return str(x); }
  static std::string show(bool x) { return x ? "true" : "false"; }
  static std::string show(const std::string& x) { return x.empty() ? "\"\"" : x; }
  static std::string show(const GradientMultiplier& x) { return format_gradient_multiplier(x); }
  static std::string show(const ScopeRule& x) { return format_scope_rule(x); }
  static std::string show(const AugmentList&) { return "(from hflip, scale_*)"; }
  template <class T>
  static std::string show(const std::vector<T>& xs) {
    std::string out = "[";
    for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + show(xs[i]);
    return out + "]";
  }
  static std::string allowed(const Check& check) {
    if (!check.one_of.empty()) return choices(check.one_of);
    if (check.is_path && check.url_ok) return "URL, or path (relative to the config file)";
    if (check.is_path) return "path (relative to the config file)";
    if (check.accepts) return check.expected;
    std::string r = describe_range(check);
    return r.empty() ? "" : r.substr(1);
  }
  std::vector<std::string> prefix_;
  std::ostringstream rows_;
};

// Applies "a.b.c=value" onto the tree, creating mappings on the way.
void apply_override(YAML::Node root, const std::string& text, Overrides& overridden) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + text + ": expected key.path=value");
  std::string key = text.substr(0, eq);
  // The value is YAML too: the same bounds as a config file.
  const std::string source = "--set " + text;
  check_yaml_size(static_cast<int64_t>(text.size() - eq - 1), source, YamlErrorKind::kConfig);
  check_yaml_node_count(text.substr(eq + 1), source, YamlErrorKind::kConfig);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ": malformed value: " + e.msg);
  }
  check_yaml_expansion(value, source, YamlErrorKind::kConfig);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!cur[parts[i]].IsDefined() || cur[parts[i]].IsNull()) cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
    if (!cur[parts[i]].IsMap()) throw ConfigError("--set " + text + ": " + parts[i] + " is not a section");
    cur.reset(cur[parts[i]]);  // rebind, not assign (yaml-cpp's = would copy content)
  }
  cur[parts.back()] = value;
  overridden[key] = text;
}

// yaml-cpp keeps both entries of a repeated key and reads the first: refuse them instead.
void reject_duplicate_keys(const YAML::Node& node, const std::string& source, const std::string& prefix) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) reject_duplicate_keys(node[i], source, prefix + "[" + str(i) + "]");
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;
  for (const auto& item : node) {
    const int line = item.first.Mark().line + 1;
    // A key that is a list or mapping ("[a, b]: 1", "? {a: 1}") names no setting, and converting
    // it to a string later threw yaml-cpp's own exception past every handler.
    if (!item.first.IsScalar()) {
      const std::string at = prefix.empty() ? "the top level" : prefix.substr(0, prefix.size() - (prefix.back() == '.'));
      throw ConfigError(location(source, line) + at + ": expected key names, got " + quoted(item.first) + " as a key");
    }
    const std::string key = item.first.Scalar();
    auto [it, fresh] = first_line.emplace(key, line);
    if (!fresh)
      throw ConfigError(location(source, line) + prefix + key + ": duplicate key (first set at line " +
                        str(it->second) + ")");
    reject_duplicate_keys(item.second, source, prefix + key + ".");
  }
}

}  // namespace

void check_faster_rcnn_config(const FasterRcnnConfig& f, bool masks, const std::string& at) {
  DETSEG_CONFIG_CHECK(f.number_of_stages >= 1 && f.number_of_stages <= 3, at,
                      "model.faster_rcnn.number_of_stages: expected 1, 2 or 3, got ", f.number_of_stages);
  const size_t levels = f.feature_extractor == "c4" ? 1 : 5;
  DETSEG_CONFIG_CHECK(f.first_stage_anchor_sizes.size() == levels, at,
                      "model.faster_rcnn.first_stage_anchor_sizes: one size per feature map (", levels,
                      f.feature_extractor == "c4" ? ": C4's layer3" : ": FPN levels P2-P6", "), got ",
                      f.first_stage_anchor_sizes.size());
  if (f.feature_extractor == "c4") {
    // The crop must survive the max-pool: the box classifier and C4's mask head read that map.
    DETSEG_CONFIG_CHECK(f.initial_crop_size >= f.maxpool_kernel_size, at,
                        "model.faster_rcnn.initial_crop_size (", f.initial_crop_size,
                        ") must be at least maxpool_kernel_size (", f.maxpool_kernel_size,
                        ") with feature_extractor c4");
  }
  DETSEG_CONFIG_CHECK(f.first_stage_box_coder_scales.size() == 4 && f.second_stage_box_coder_scales.size() == 4, at,
                      "model.faster_rcnn.*_box_coder_scales: 4 values (y, x, h, w)");
  DETSEG_CONFIG_CHECK(f.first_stage_unmatched_threshold <= f.first_stage_matched_threshold, at,
                      "model.faster_rcnn.first_stage_unmatched_threshold must not exceed first_stage_matched_threshold");
  DETSEG_CONFIG_CHECK(f.first_stage_box_predictor_kernel_size % 2 == 1, at,
                      "model.faster_rcnn.first_stage_box_predictor_kernel_size must be odd");
  DETSEG_CONFIG_CHECK(!masks || f.number_of_stages >= 2, at,
                      "model.faster_rcnn.number_of_stages: mask_rcnn needs 2 or 3 stages");
}

namespace {

void check_consistency(const PipelineConfig& c) {
  const std::string at = location(c.source);
  const ModelTypeInfo* type = find_model_type(c.model.type);
  DETSEG_CONFIG_CHECK(type != nullptr, at, "model.type: unknown meta-architecture ", c.model.type);
  const bool segmenter = type->kind == "segmenter";
  if (!type->families.empty()) {
    const BackboneInfo* backbone = find_backbone(c.model.backbone);
    DETSEG_CONFIG_CHECK(backbone && model_takes_backbone(*type, *backbone), at, "model.backbone: ", c.model.type,
                        " takes ", join(backbones_for(*type)), "; got ", c.model.backbone);
  }
  DETSEG_CONFIG_CHECK((c.model.neck.empty() && c.model.head.empty()) || !type->neck.empty(), at,
                      "model.neck/model.head: ", c.model.type, " has its own; they choose RetinaNet's and EfficientDet's");
  DETSEG_CONFIG_CHECK(c.model.num_classes > 0, at, "model.num_classes: required (a positive integer)");
  DETSEG_CONFIG_CHECK(c.model.min_level <= c.model.max_level, at, "model.min_level (", c.model.min_level,
                      ") must not exceed model.max_level (", c.model.max_level, ")");
  DETSEG_CONFIG_CHECK(c.model.unmatched_threshold <= c.model.matched_threshold, at,
                      "model.unmatched_threshold must not exceed model.matched_threshold");
  DETSEG_CONFIG_CHECK(c.model.box_loss_weight == -1 || c.model.box_loss_weight >= 0, at,
                      "model.box_loss_weight: -1 (the box loss's own weight) or >= 0, got ", c.model.box_loss_weight);
  DETSEG_CONFIG_CHECK(c.model.resizer != "keep_aspect" || c.model.min_dimension <= c.model.max_dimension, at,
                      "model.min_dimension (", c.model.min_dimension, ") must not exceed model.max_dimension (",
                      c.model.max_dimension, ")");
  DETSEG_CONFIG_CHECK(c.model.resizer != "keep_aspect" || !segmenter,
                      at, "model.resizer: keep_aspect is for detectors; DeepLab trains on model.deeplab.crop_size crops "
                      "and evaluates at full resolution");
  DETSEG_CONFIG_CHECK(c.model.pixel_mean.size() == 3 && c.model.pixel_std.size() == 3, at,
                      "model.pixel_mean and model.pixel_std need 3 values (RGB)");
  DETSEG_CONFIG_CHECK(c.train_input.scale_min <= c.train_input.scale_max, at,
                      "train_input.scale_min must not exceed train_input.scale_max");
  if (const EvaluatorInfo* metric = find_evaluator(c.eval.metric); metric && metric->label_maps != segmenter) {
    std::string fitting;
    for (const EvaluatorInfo& e : evaluators())
      if (e.label_maps == segmenter) fitting += (fitting.empty() ? "" : " or ") + e.name;
    throw ConfigError(at + "eval.metric: " + c.eval.metric + " scores " + (metric->label_maps ? "label maps" : "detections") +
                      "; a " + (segmenter ? "segmentation model" : "detector") + " takes " + fitting);
  }
  if (type->check) type->check(c, at);  // the model's own rules (config/model_checks.cpp)
  {
    // Each evaluation set's files, metrics rows and --eval-set choice carry its name; eval_input's
    // is "eval" (eval-<step>.json, `--eval-set eval`) and eval.on_train's is "train": a second set of
    // one name would overwrite the other's files.
    std::set<std::string> names = {"eval"};
    if (c.eval.on_train > 0) names.insert("train");
    for (const auto& [name, input] : c.eval_inputs)
      DETSEG_CONFIG_CHECK(names.insert(name).second, at, "eval_inputs.", name, ": ",
                          name == "eval"    ? "the name eval is eval_input's"
                          : name == "train" ? "the name train is eval.on_train's set"
                                            : "a second set of this name",
                          "; each evaluation set needs its own name (it names the set's files)");
  }
  {
    const std::string& d = c.device;
    const bool cuda_index = d.rfind("cuda:", 0) == 0 && d.size() > 5 &&
                            d.find_first_not_of("0123456789", 5) == std::string::npos;
    DETSEG_CONFIG_CHECK(d == "auto" || d == "cpu" || d == "cuda" || cuda_index, at,
                        "device: expected auto, cpu, cuda or cuda:N, got '", d, "'");
  }
  if (!c.model.pretrained.empty())
    expected_sha256(c.model.pretrained, c.model.pretrained_sha256, at + "model.pretrained",
                    at + "model.pretrained_sha256");
  else
    DETSEG_CONFIG_CHECK(c.model.pretrained_sha256.empty(), at,
                        "model.pretrained_sha256 is set but model.pretrained is empty");
  if (c.train.schedule.type == "stepwise")
    DETSEG_CONFIG_CHECK(c.train.schedule.drop_steps.size() == 2, at,
                        "train.schedule.drop_steps: stepwise needs 2 steps (x0.1 and x0.01 drops)");
}

}  // namespace

namespace {

YAML::Node parse_yaml_file_text(const std::string& yaml_text, const std::string& source) {
  check_yaml_size(static_cast<int64_t>(yaml_text.size()), source, YamlErrorKind::kConfig);
  check_yaml_node_count(yaml_text, source, YamlErrorKind::kConfig);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(location(source, e.mark.line + 1, e.mark.column + 1) + "malformed YAML: " + e.msg);
  }
  // Before any walk over the tree: every later one (duplicate keys, origins, the reader) visits
  // an alias's content again at each alias.
  check_yaml_expansion(root, source, YamlErrorKind::kConfig);
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError(location(source, root.Mark().line >= 0 ? root.Mark().line + 1 : 1) +
                      "expected a mapping of keys (model:, train:, ...) at the top level, got " + quoted(root));
  reject_duplicate_keys(root, source, "");
  return root;
}

void record_origin(const YAML::Node& node, const std::string& path, const std::string& file, KeyOrigins& origins) {
  origins[path] = file;
  if (node.IsMap())
    for (const auto& item : node)
      if (item.first.IsScalar()) record_origin(item.second, path + "." + item.first.Scalar(), file, origins);
}

void forget_origins_under(const std::string& path, KeyOrigins& origins) {
  for (auto it = origins.lower_bound(path); it != origins.end() && it->first.compare(0, path.size(), path) == 0;) {
    const bool below = it->first.size() == path.size() || it->first[path.size()] == '.';
    it = below ? origins.erase(it) : std::next(it);
  }
}

// Merges `top` over `bottom` key by key: sections merge recursively, anything else in `top`
// replaces what `bottom` had (lists too, as mmdetection's _base_ does).
void merge_over(YAML::Node bottom, const YAML::Node& top, const std::string& prefix, const KeyOrigins& top_origins,
                KeyOrigins& origins) {
  for (const auto& item : top) {
    const std::string key = item.first.Scalar();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& const_bottom = bottom;
    YAML::Node below = const_bottom[key];
    if (below.IsDefined() && below.IsMap() && item.second.IsMap()) {
      merge_over(below, item.second, path, top_origins, origins);
      continue;
    }
    bottom[key] = item.second;  // shares the node (and its line); the source trees are not reused
    forget_origins_under(path, origins);
    for (auto it = top_origins.lower_bound(path); it != top_origins.end() && it->first.compare(0, path.size(), path) == 0; ++it)
      if (it->first.size() == path.size() || it->first[path.size()] == '.') origins[it->first] = it->second;
  }
}

// Reads `path` with its _base_ configs (a path or a list, relative to the file that names them)
// merged underneath, the later base over the earlier and the file itself over all.
YAML::Node load_with_bases(const std::string& path, const std::string& text, std::vector<std::string>& chain,
                           KeyOrigins& origins, std::vector<std::string>& files) {
  YAML::Node own = parse_yaml_file_text(text, path);
  KeyOrigins own_origins;
  for (const auto& item : own)
    if (item.first.IsScalar()) record_origin(item.second, item.first.Scalar(), path, own_origins);
  const YAML::Node& const_own = own;
  const YAML::Node bases = const_own["_base_"];
  if (!bases.IsDefined()) {
    origins = std::move(own_origins);
    return own;
  }
  const std::string where = location(path, bases.Mark().line + 1);
  std::vector<std::string> base_paths;
  if (bases.IsScalar()) base_paths.push_back(bases.Scalar());
  else if (bases.IsSequence())
    for (const auto& b : bases) {
      if (!b.IsScalar()) throw ConfigError(where + "_base_: expected a config path or a list of paths");
      base_paths.push_back(b.Scalar());
    }
  else
    throw ConfigError(where + "_base_: expected a config path or a list of paths, got " + quoted(bases));
  own.remove("_base_");
  forget_origins_under("_base_", own_origins);

  YAML::Node merged(YAML::NodeType::Map);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  for (const std::string& base : base_paths) {
    std::string base_path = std::filesystem::path(base).is_relative()
                                ? (std::filesystem::path(dir.empty() ? "." : dir) / base).lexically_normal().string()
                                : base;
    DETSEG_CONFIG_CHECK(file_exists(base_path) && !is_directory(base_path), where, "_base_: ", base_path,
                        ": config file not found");
    for (const std::string& seen : chain)
      DETSEG_CONFIG_CHECK(!std::filesystem::equivalent(seen, base_path), where, "_base_: ", base_path,
                          " is already being read (a cycle of _base_ configs)");
    chain.push_back(base_path);
    files.push_back(base_path);
    KeyOrigins base_origins;
    YAML::Node base_root =
        load_with_bases(base_path, read_yaml_file(base_path, YamlErrorKind::kConfig), chain, base_origins, files);
    chain.pop_back();
    merge_over(merged, base_root, "", base_origins, origins);
  }
  merge_over(merged, own, "", own_origins, origins);
  return merged;
}

// train_input.augment written in the config itself (or by --set) replaces the older keys its
// _base_ set (hflip, scale_min, scale_max): the demo recipes set hflip, and a config built on one
// gives its own list. Both written at the same level stay an error (resolve_augment_lists).
void drop_inherited_augment_keys(YAML::Node& root, const std::string& source, const Overrides& overridden,
                                 const KeyOrigins& origins) {
  const YAML::Node& const_root = root;
  if (!root.IsMap()) return;
  const YAML::Node const_input = const_root["train_input"];
  if (!const_input.IsDefined() || !const_input.IsMap() || !const_input["augment"].IsDefined()) return;
  YAML::Node input = root["train_input"];
  auto by_set = [&](const std::string& key) {
    return overridden.count("train_input") > 0 || overridden.count("train_input." + key) > 0;
  };
  auto from_file = [&](const std::string& key) {
    const auto it = origins.find("train_input." + key);
    return it != origins.end() && it->second == source;
  };
  if (!by_set("augment") && !from_file("augment")) return;
  for (const char* key : {"hflip", "scale_min", "scale_max"}) {
    const bool here = by_set(key) || (from_file(key) && !by_set("augment"));
    if (const_input[key].IsDefined() && !here) input.remove(key);
  }
}

// parse_config's work. A failed rule across keys (check_consistency) is handed back in
// `rule_error` instead of thrown, for blame_overrides to weigh.
PipelineConfig read_config(const std::string& yaml_text, const std::string& source,
                           const std::vector<std::string>& overrides, std::string& rule_error) {
  std::vector<std::string> chain;
  if (file_exists(source)) chain.push_back(source);
  KeyOrigins origins;
  std::vector<std::string> files = chain;
  YAML::Node root = load_with_bases(source, yaml_text, chain, origins, files);
  Overrides overridden;
  for (const auto& o : overrides) apply_override(root, o, overridden);
  drop_inherited_augment_keys(root, source, overridden, origins);
  PipelineConfig config;
  config.source = source;
  config.files = files;
  Reader reader(root, source, overridden, origins);
  visit_config(reader, config);
  reader.finish();
  resolve_augment_lists(config);
  try {
    check_consistency(config);
  } catch (const ConfigError& e) {
    rule_error = e.what();
  }
  return config;
}

// A rule across keys fails naming the config file ("x.yaml: model.min_dimension (999) must not
// exceed ..."). When --set values took part, the message names them instead: each one whose
// removal lets the rule pass or changes its message. (An override without which the config fails
// before the rules, say one that mends a bad value in the file, gives no verdict.) Each override
// costs one more read of the config: past 32 of them (a script's, not a person's) the file is named.
std::string blame_overrides(const std::string& message, const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides) {
  const std::string at = location(source);
  if (overrides.empty() || overrides.size() > 32 || message.compare(0, at.size(), at) != 0) return message;
  std::string culprits;
  for (size_t i = 0; i < overrides.size(); ++i) {
    std::vector<std::string> others = overrides;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    std::string without;
    try {
      read_config(yaml_text, source, others, without);
    } catch (const Error&) {
      continue;
    }
    if (without != message) culprits += (culprits.empty() ? "--set " : ", --set ") + overrides[i];
  }
  return culprits.empty() ? message : culprits + ": " + message.substr(at.size());
}

}  // namespace

PipelineConfig parse_config(const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides) {
  std::string rule_error;
  PipelineConfig config = read_config(yaml_text, source, overrides, rule_error);
  if (!rule_error.empty()) throw ConfigError(blame_overrides(rule_error, yaml_text, source, overrides));
  return config;
}

PipelineConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  DETSEG_CONFIG_CHECK(file_exists(path), path, ": config file not found");
  DETSEG_CONFIG_CHECK(!is_directory(path), path, ": is a folder, expected a config file");
  return parse_config(read_yaml_file(path, YamlErrorKind::kConfig), path, overrides);
}

std::string config_to_yaml(const PipelineConfig& config) {
  Writer writer;
  PipelineConfig copy = config;
  visit_config(writer, copy);
  return writer.text();
}

int64_t keep_aspect_size_divisibility(const ModelConfig& model) {
  const ModelTypeInfo* type = find_model_type(model.type);
  const int64_t pad = type ? type->pad_multiple : 32;
  return pad > 0 ? pad : int64_t(1) << model.max_level;
}

std::string config_reference_markdown() {
  Documenter doc;
  PipelineConfig defaults;
  visit_config(doc, defaults);
  return doc.text() + "\n### Augmentation steps (`train_input.augment`)\n\n" + augment_steps_markdown();
}

}  // namespace detseg

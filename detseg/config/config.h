// Implements: the pipeline config (the Object Detection API's pipeline.config, as YAML): typed
// structs with their defaults. Every key, type, range, default and doc string is declared once, in
// visit_config() in config.cpp; loading, validation, --set overrides, the resolved-config dump and
// docs/config.md are all driven from that one declaration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/config/augment_steps.h"
#include "detseg/train/fine_tune_options.h"
#include "detseg/train/optimizer_options.h"
#include "detseg/train/schedule_options.h"

namespace detseg {

struct InputConfig {
  std::string format = "coco";        // coco | voc | seg_folder
  std::string annotations;            // COCO JSON, or VOC folder, or seg folder list
  std::string images;                 // image folder (COCO: file_name is relative to it)
  std::string split;                  // VOC ImageSets/Main/<split>.txt
  std::string label_map;              // optional class names file
  std::string box_policy = "clip";    // clip | drop: boxes outside the image or degenerate
  std::string bad_images = "stop";    // stop | skip: an image that cannot be read or decoded
  bool require_boxes = true;          // training: refuse a set in which no box is usable
  bool hflip = false;
  double scale_min = 1.0;             // random scale jitter (EfficientDet) / scale range (DeepLab)
  double scale_max = 1.0;
  // Training augmentation, in order (config/augment_steps.h); resolved from hflip/scale_* and the
  // model's resizer when the config leaves it out.
  AugmentList augment;
  int64_t num_workers = 2;
  int64_t prefetch = 4;
  int64_t sample_1_of_n = 1;          // evaluate every n-th image
  int64_t max_images = 0;             // 0: all
  std::vector<int64_t> void_values;   // seg_folder: raw label values meaning "unlabelled" (-> ignore)
};

// DeepLab's flags (model.type deeplabv3plus / deeplabv3): network, loss, last layers and evaluation.
struct DeepLabConfig {
  int64_t output_stride = 16;         // 8, 16 or 32
  int64_t aspp_channels = 256;
  double aspp_dropout = 0.1;
  bool image_pooling = true;          // ASPP image-level branch (add_image_level_feature)
  int64_t low_level_channels = 48;    // decoder projection of the stride-4 features
  int64_t decoder_channels = 256;
  bool head_conv = false;             // deeplabv3: 3x3 conv + BN + ReLU before the classifier
  int64_t crop_size = 513;            // square training crop
  double scale_step = 0.25;           // train_input.scale_min..scale_max in these steps (0: continuous)
  int64_t ignore_label = 255;
  double loss_weight = 1.0;
  std::vector<double> class_weights;  // one per class (DeepLab's label_weights); empty: all 1
  bool upsample_logits = true;        // false: downsample labels (nearest) instead
  double top_k_percent_pixels = 1.0;
  int64_t hard_example_mining_step = 0;
  std::vector<std::string> last_layers = {"aspp.", "decoder.", "classifier."};
  bool gradient_multipliers = true;   // biases x2, last layers x last_layer_gradient_multiplier
  double last_layer_gradient_multiplier = 1.0;
  bool initialize_last_layer = true;  // false: train.fine_tune skips last_layers
  std::vector<double> eval_scales = {1.0};
  bool eval_flip = false;
};

// model.faster_rcnn.*: Faster R-CNN / Mask R-CNN (the reference's faster_rcnn_meta_arch keys).
struct FasterRcnnConfig {
  int64_t number_of_stages = 2;
  std::string feature_extractor = "fpn";  // fpn | c4
  int64_t initial_crop_size = 14;
  int64_t maxpool_kernel_size = 2;
  int64_t maxpool_stride = 2;
  std::vector<double> first_stage_anchor_sizes = {32, 64, 128, 256, 512};
  std::vector<double> first_stage_anchor_scales = {1.0};
  std::vector<double> first_stage_anchor_aspect_ratios = {2.0, 1.0, 0.5};
  bool first_stage_clip_anchors_to_image = false;
  int64_t first_stage_box_predictor_kernel_size = 3;
  int64_t first_stage_box_predictor_depth = 256;
  int64_t first_stage_atrous_rate = 1;
  double first_stage_matched_threshold = 0.7;
  double first_stage_unmatched_threshold = 0.3;
  int64_t first_stage_minibatch_size = 256;
  double first_stage_positive_balance_fraction = 0.5;
  double first_stage_nms_score_threshold = 0.0;
  double first_stage_nms_iou_threshold = 0.7;
  int64_t first_stage_pre_nms_top_k = 0;
  int64_t first_stage_max_proposals = 300;
  double first_stage_localization_loss_weight = 2.0;
  double first_stage_objectness_loss_weight = 1.0;
  std::vector<double> first_stage_box_coder_scales = {10, 10, 5, 5};
  int64_t second_stage_batch_size = 64;
  double second_stage_balance_fraction = 0.25;
  double second_stage_matched_threshold = 0.5;
  bool second_stage_add_groundtruth_proposals = false;
  std::vector<double> second_stage_box_coder_scales = {10, 10, 5, 5};
  std::string second_stage_classification_loss = "softmax";  // softmax | sigmoid
  bool share_box_across_classes = false;
  double second_stage_localization_loss_weight = 2.0;
  double second_stage_classification_loss_weight = 1.0;
  double second_stage_mask_loss_weight = 1.0;
  int64_t second_stage_max_detections_per_class = 100;
  int64_t hard_example_miner_num_examples = 0;  // 0: off (second-stage sampling instead)
  double hard_example_miner_iou_threshold = 0.7;
  int64_t representation_size = 1024;
  int64_t box_pool_size = 7;
  int64_t mask_pool_size = 14;
  int64_t mask_head_depth = 256;
  double mask_threshold = 0.5;
  bool output_detection_features = false;
};

struct ModelConfig {
  std::string type = "retinanet";     // retinanet | efficientdet | faster_rcnn | mask_rcnn | deeplabv3plus | deeplabv3
  int64_t num_classes = 0;
  std::string backbone = "resnet50";
  std::string efficientdet = "d0";    // d0..d7 when type is efficientdet
  // ImageNet weights for the backbone: a URL (downloaded once into the weights cache) or a path;
  // empty: none. Checked against pretrained_sha256 (or the hash in a torchvision file name).
  std::string pretrained;
  std::string pretrained_sha256;      // a SHA-256 or its first 8+ hex digits
  int64_t image_size = 512;
  // fixed: every image fitted into an image_size square (aspect kept, padded); keep_aspect: the
  // reference's keep_aspect_ratio_resizer, each batch padded to its largest image.
  std::string resizer = "fixed";
  int64_t min_dimension = 600;
  int64_t max_dimension = 1024;
  int64_t min_level = 3;
  int64_t max_level = 7;
  int64_t num_scales = 3;
  std::vector<double> aspect_ratios = {1.0, 2.0, 0.5};
  double anchor_scale = 4.0;
  std::string neck;                   // a DETSEG_NECK line; empty: the model type's own
  std::string head;                   // a DETSEG_DENSE_HEAD line; empty: the model type's own
  int64_t fpn_channels = 256;
  std::string head_norm = "none";     // RetinaNet head: none (torchvision v1) | group_norm (v2)
  bool frozen_batch_norm = true;
  // EfficientDet's batch norm momentum (torch's convention: the weight of each new batch). The
  // reference's 0.99 decay is 0.01; short from-scratch runs need faster statistics (docs/training.md).
  double batch_norm_momentum = 0.01;
  int64_t trainable_backbone_stages = 3;
  double matched_threshold = 0.5;
  double unmatched_threshold = 0.4;
  double focal_alpha = 0.25;
  double focal_gamma = 2.0;
  std::string box_loss = "huber";     // a DETSEG_BOX_LOSS line of config/parts.def
  double huber_delta = 0.1;
  double box_loss_weight = -1;        // -1: box_loss's default weight (box_loss_weight_of)
  std::vector<double> pixel_mean = {0.485, 0.456, 0.406};
  std::vector<double> pixel_std = {0.229, 0.224, 0.225};
  DeepLabConfig deeplab;              // model.deeplab.*
  FasterRcnnConfig faster_rcnn;       // model.faster_rcnn.*
};

struct PostprocessConfig {
  int64_t max_detection_points = 5000;  // top-k before NMS across levels and classes; 0: all anchors
  double score_threshold = 0.05;
  double nms_iou_threshold = 0.5;
  int64_t max_detections_per_image = 100;
  std::string nms = "per_class";       // per_class | class_agnostic | soft (postprocess/nms_choice.h)
  double soft_nms_sigma = 0.5;
  // predict only: tiles of this size (0: the whole image at once), overlapping by this fraction,
  // plus the whole image resized as usual (postprocess/tiling.h).
  int64_t tile_size = 0;
  double tile_overlap = 0.2;
  bool tile_include_full_image = true;
};

struct DistributedConfig {
  double timeout_s = 300;             // rendezvous and every collective; a dead or hung peer fails others within it
  double bucket_mb = 25;              // gradient all-reduce bucket size
  bool sync_batch_norm = false;       // trainable batch norm over the global batch (all ranks)
  std::string backend = "auto";       // auto | gloo | nccl: the backend of CUDA tensors (CPU ones: gloo)
};

// train.profile: the op-level profile of a few steps (engine/step_profiler.h).
struct ProfileConfig {
  int64_t steps = 0;    // steps profiled (0: off)
  int64_t warmup = 10;  // steps of this run (resumed or not) before them
};

struct TrainConfig {
  int64_t batch_size = 2;
  int64_t num_steps = 1000;
  int64_t seed = 42;
  ScheduleOptions schedule;           // train.schedule.*
  // train.optimizer.*, and train.{l2_weight, l2_pattern, freeze_pattern, gradient_multipliers,
  // clip_gradients_norm}
  OptimizerOptions optimizer;
  double moving_average_decay = 0.0;  // 0: no EMA
  int64_t checkpoint_every = 500;
  int64_t keep_checkpoints = 7;
  int64_t log_every = 10;
  // none | bf16 | fp16: the forward pass under autocast in that type (losses and box decoding stay
  // fp32); fp16 adds a dynamic gradient scaler, saved in checkpoints.
  std::string mixed_precision = "none";
  FineTuneOptions fine_tune;          // train.fine_tune.*
  DistributedConfig distributed;      // multi-process training (see docs/distributed.md)
  ProfileConfig profile;              // train.profile.*
};

struct EvalConfig {
  bool class_agnostic = false;
  int64_t batch_size = 1;
  int64_t every_steps = 0;            // 0: only at the end of training
  int64_t on_train = 0;               // also score the first N train_input images (as set "train")
  std::string metric;                 // coco | voc | miou (engine/evaluate's table); empty: the model's kind's
  bool voc_use_07_metric = false;     // voc: VOC2007's 11-point AP instead of the all-point area
  bool pictures = true;               // PR curves, confusion matrix, ... (docs/evaluation.md, "Pictures")
};

struct PipelineConfig {
  std::string source;                 // file it came from
  std::vector<std::string> files;     // that file and every _base_ file it pulled in: what commands must not overwrite
  // auto | cpu | cuda | cuda:N. auto: cuda:LOCAL_RANK when a GPU is visible, else cpu (see
  // engine/device.h); the --device flag sets it.
  std::string device = "auto";
  // Images (and label PNGs) whose header claims more pixels are refused before decoding.
  int64_t max_image_pixels = 178956970;
  ModelConfig model;
  PostprocessConfig postprocess;
  TrainConfig train;
  InputConfig train_input;
  EvalConfig eval;
  InputConfig eval_input;
  // More evaluation sets, by name (eval_inputs: {val: {...}, test: {...}}), in file order; each
  // is scored and logged on its own (eval/<name>/AP).
  std::vector<std::pair<std::string, InputConfig>> eval_inputs;
};

// Loads and validates `path`, then applies `overrides` ("a.b.c=value", value in YAML syntax).
// Throws ConfigError "file:line: key.path: what was expected, got ..." on any problem: malformed
// YAML, unknown key, wrong type, out-of-range value, unknown name. Relative paths in *_input are
// resolved against the config file's folder.
PipelineConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Same, from YAML text; `source` names it in messages and anchors relative paths.
// model.faster_rcnn's own rules (anchor sizes per level, stages, C4 crop, thresholds): a
// ConfigError naming the key, prefixed by `at` (the file's location). Config parsing applies it,
// and FasterRcnnImpl applies it to options built in code.
void check_faster_rcnn_config(const FasterRcnnConfig& f, bool masks, const std::string& at = "");

PipelineConfig parse_config(const std::string& yaml_text, const std::string& source,
                            const std::vector<std::string>& overrides = {});

// The resolved config (every key, defaults filled in) as YAML text.
std::string config_to_yaml(const PipelineConfig& config);

// What each detector batch's height and width are a multiple of with model.resizer keep_aspect:
// EfficientDet's BiFPN resamples by exact factors of 2 (2^max_level); ResNet + FPN take any size,
// padded to 32 as torchvision does so that C2..C5 halve exactly.
int64_t keep_aspect_size_divisibility(const ModelConfig& model);

// Markdown table of every key: path, type, default, allowed values/range, meaning.
std::string config_reference_markdown();

}  // namespace detseg

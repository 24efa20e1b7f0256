// Implements: the Object Detection API's Faster R-CNN meta-architecture (faster_rcnn_meta_arch.py)
// on our ops: 1, 2 or 3 stages and the Mask R-CNN head.
//  - stage 1: RPN on grid anchors (one anchor grid per FPN level); training prunes anchors that leave
//    the padded image (or clips them, by option), inference clips them; target assignment (0.7/0.3,
//    forced match per box), a balanced minibatch (256, half positives), smooth-L1 and objectness
//    losses normalised by the minibatch size; proposals by NMS up to first_stage_max_proposals with
//    gradients stopped. With number_of_stages 1 the proposals are the (class-agnostic) detections.
//  - stage 2: proposals sampled to second_stage_batch_size in training (unless the hard-example
//    miner is on), RoI features, box classifier; softmax (or sigmoid) classification and smooth-L1
//    on the target class only, each normalised by the image's number of valid proposals and
//    averaged over the batch; multi-class NMS with a clip window at inference.
//  - stage 3 (inference only; training runs 2): the mask head re-crops features at the final
//    NMS'd boxes (C4: layer3 crops through layer4, as the reference's third stage; in training the
//    C4 mask head reads the proposals' layer4 features of the box classifier). Masks are trained on the sampled proposals against ground-truth masks
//    crop_and_resized to each proposal (gradients stopped), sigmoid loss normalised by the mask
//    pixels of the positives; predicted masks of the detected class are pasted into the image.
// The objectness of the reference is a 2-class softmax over (background, object) logits; the
// network here predicts one logit x per anchor (torchvision's layout), the same distribution as
// the softmax of (0, x), so the loss is the same cross-entropy.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/models/detector.h"
#include "detseg/models/faster_rcnn_network.h"
#include "detseg/ops/anchors.h"
#include "detseg/ops/hard_example_miner.h"
#include "detseg/postprocess/nms_choice.h"

namespace detseg {

// The model's settings: model.faster_rcnn itself (FasterRcnnConfig, both stages, as the config
// validated it: one struct, no copies) plus what comes from the rest of the config.
struct FasterRcnnOptions : FasterRcnnConfig {
  int64_t num_classes = 1;
  int64_t image_size = 512;
  int64_t size_divisibility = 0;  // keep_aspect: batches of any multiple of this; 0: image_size square
  PostprocessConfig postprocess;  // the second stage's score threshold, NMS and detections per image
};

// Everything one forward pass predicts, batched with static shapes; P = max_num_proposals().
// Padded proposal rows are zero boxes, and their second-stage rows are zero.
struct FasterRcnnPredictions {
  std::vector<at::Tensor> features;  // P2..P6
  at::Tensor anchors;                // [A, 4] every anchor, network output order
  at::Tensor rpn_objectness;         // [B, A] object logit (softmax of (0, x))
  at::Tensor rpn_box_encodings;      // [B, A, 4] (ty, tx, th, tw), coder scales applied
  at::Tensor anchor_indices;         // [A'] anchors used this pass (pruned in training)
  at::Tensor raw_proposal_boxes;     // [B, A', 4] decoded before NMS (network-input pixels)
  at::Tensor raw_proposal_scores;    // [B, A'] objectness probabilities before NMS
  at::Tensor proposal_boxes;         // [B, P, 4] absolute network-input pixels, zero padded
  at::Tensor proposal_scores;        // [B, P]
  at::Tensor num_proposals;          // [B] int64, a host (CPU) tensor on every device
  // number_of_stages >= 2:
  at::Tensor class_predictions_with_background;  // [B * P, K + 1] logits, background first
  at::Tensor refined_box_encodings;              // [B * P, K, 4] (or [B * P, 1, 4] shared)
  // C4 Mask R-CNN in training or with 2 stages: the second stage's layer4 features of each valid
  // proposal [sum num_proposals, C5, S, S], image after image (the reference's
  // box_classifier_features); the mask head reads them instead of cropping again.
  at::Tensor box_classifier_features;
  // Optional: mask logits of every valid proposal [sum num_proposals, K + 1, M, M] (background channel
  // first). Left undefined by predict(): the loss runs the mask head on the positives only.
  at::Tensor mask_logits;
};

class FasterRcnnImpl : public DetectorImpl {
 public:
  FasterRcnnImpl(FasterRcnnOptions options, FasterRcnnNetworkOptions network_options);

  ModelLosses losses(const Batch& batch) override;
  std::vector<Boxes> detect(const Batch& batch) override;
  std::pair<ModelLosses, std::vector<Boxes>> losses_and_detect(const Batch& batch) override;
  int64_t input_size() const override { return options_.image_size; }

  // Export: forward is the feature extractor + RPN head (feature maps, objectness, torchvision-order
  // deltas); box_head takes RoI crops of the maps (class logits, deltas [K, (num_classes + 1) * 4],
  // C4 with masks also its layer4 region features); mask_head takes the mask crops (C4: those region
  // features) to mask logits. Proposal NMS and the crops run in C++ between them.
  std::vector<std::string> network_output_names() const override;
  std::vector<at::Tensor> network_outputs(const at::Tensor& images) override;
  std::vector<std::pair<std::string, at::Tensor>> network_constants(int64_t height, int64_t width,
                                                                    const at::Device& device) const override;
  std::vector<NetworkGraph> network_graphs() const override;
  std::vector<at::Tensor> run_network_graph(const std::string& name, const std::vector<at::Tensor>& inputs) override;
  std::vector<at::Tensor> network_graph_example(const std::string& name,
                                                const std::vector<at::Tensor>& forward_outputs) override;
  void use_network(NetworkFunction network) override { exported_ = std::move(network); }

  // The forward pass; training (is_training()) samples proposals against the batch's ground truth.
  FasterRcnnPredictions predict(const Batch& batch);
  // Detections per image in network-input pixels (before mapping back to the original image).
  std::vector<Boxes> postprocess(const FasterRcnnPredictions& p, const Batch& batch);
  // The losses of a prediction (names as the reference's: first_stage_localization_loss, ...).
  ModelLosses loss(const FasterRcnnPredictions& p, const Batch& batch,
                   const std::vector<Boxes>& detections = {});

  // Rows per image of the proposal tensors: second_stage_batch_size when training two or more
  // stages without the hard-example miner, first_stage_max_proposals otherwise.
  int64_t max_num_proposals() const;
  // Anchors for pyramid maps of these sizes (cached), [A, 4] xyxy, order (level, y, x, anchor),
  // on `device` (generated on the CPU once, copied to each device once).
  at::Tensor anchors_for(const std::vector<std::array<int64_t, 2>>& level_sizes,
                         const at::Device& device = at::kCPU) const;
  int64_t stages() const;  // number_of_stages as run now (3 -> 2 in training)
  const FasterRcnnOptions& options() const { return options_; }
  FasterRcnnNetwork network{nullptr};

 private:
  FasterRcnnOptions options_;
  // Keyed by the level sizes; each entry holds the CPU anchors and their per-device copies.
  mutable std::map<std::vector<int64_t>, DeviceCachedTensor> anchor_cache_;
  NetworkFunction exported_;  // set by use_network: the exported graphs run in place of `network`

  // Graph `name` of the exported module once use_network() was called, else of `network`.
  std::vector<at::Tensor> run_graph(const std::string& name, const std::vector<at::Tensor>& inputs);
  // The mask head's input for rois [K, 5] (FPN: RoIAlign crops; C4: layer4 on the crops).
  at::Tensor mask_input(const std::vector<at::Tensor>& features, const at::Tensor& rois);
  // One class's mask logits per RoI, channels [K] (background = 0) -> [K, M, M].
  at::Tensor class_mask_logits(const at::Tensor& mask_input, const at::Tensor& channels);

  void check_input(const Batch& batch) const;
  // Ground truth of image b (crowd boxes removed): boxes [M, 4], classes [M], masks [M, H, W] or undefined.
  struct GroundTruth {
    at::Tensor boxes, classes, masks;
  };
  GroundTruth ground_truth(const Batch& batch, int64_t b) const;
};

// Pastes per-box mask probabilities [N, M, M] into an image of height x width (torchvision's
// paste_masks_in_image: the mask grid is padded by one cell, resized bilinearly to the box) and
// thresholds them: uint8 [N, height, width]. boxes [N, 4] in that image's pixels.
at::Tensor paste_masks(const at::Tensor& masks, const at::Tensor& boxes, int64_t height, int64_t width,
                       double threshold = 0.5);

}  // namespace detseg

// Implements: the NMS family: a fast single-class greedy NMS, batched (per-class) NMS, soft-NMS
// (linear and Gaussian), the OD API's multi-class NMS with all its options, and top-k pre-selection
// across levels and classes (EfficientDet keeps 5000 (anchor, class) pairs before NMS).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "detseg/ops/box_ops.h"
#include "detseg/structures/boxes.h"

namespace detseg {

// Greedy NMS, same contract as torchvision.ops.nms: boxes [N, 4] xyxy float/double, scores [N];
// a box is dropped when its IoU with a kept higher-scoring box is > iou_threshold. Returns kept
// indices int64 [K] in decreasing score order (equal scores: lower index first). Empty input gives
// an empty result; NaN boxes/scores or mismatched shapes throw detseg::Error.
// Cost: one sort, then each candidate is tested only against kept boxes in the grid cells it
// touches (the result is bit-identical to the all-pairs loop). CUDA tensors run the CUDA kernel
// (nms_cuda.cu, torchvision's bitmask algorithm, same result); every op here returns its results on
// the input's device, and a build without CUDA kernels throws for CUDA tensors.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// NMS done independently per class id (classes: int64 [N], any values), like
// torchvision.ops.batched_nms. Returns kept indices int64 sorted by decreasing score.
at::Tensor batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                       double iou_threshold);

enum class SoftNmsMethod { kLinear, kGaussian };

struct SoftNmsOptions {
  SoftNmsMethod method = SoftNmsMethod::kGaussian;
  // Gaussian: score *= exp(-0.5 * iou^2 / sigma) (TensorFlow's soft_nms_sigma convention).
  double sigma = 0.5;
  // Linear: score *= (1 - iou) when iou > iou_threshold. Gaussian: boxes with iou > iou_threshold
  // are removed outright (1.0 = never, as the OD API uses it).
  double iou_threshold = 0.3;
  double score_threshold = 0.001;  // boxes whose decayed score falls to or below this are dropped
  int64_t max_output = -1;         // < 0: no limit
};

struct SoftNmsResult {
  at::Tensor indices;  // int64 [K] into the input, in selection order (decreasing decayed score)
  at::Tensor scores;   // [K] the decayed scores
};

SoftNmsResult soft_nms(const at::Tensor& boxes, const at::Tensor& scores,
                       const SoftNmsOptions& options = {});

// Options of the OD API's multiclass_non_max_suppression.
struct MultiClassNmsOptions {
  double score_threshold = 0.0;    // keep scores strictly greater than this
  double iou_threshold = 0.5;
  int64_t max_per_class = 100;     // <= 0: no limit
  int64_t max_total = 100;         // <= 0: no limit
  // Boxes are clipped to this window before NMS; boxes left with no area are dropped.
  std::optional<Window> clip_window;
  // Output boxes relative to clip_window (see change_coordinate_frame); needs clip_window.
  bool change_coordinate_frame = false;
  double soft_nms_sigma = 0.0;     // > 0: Gaussian soft-NMS per class instead of hard NMS
  // One NMS over every class's candidates: a box suppresses overlapping boxes of any class (with
  // soft_nms_sigma: one soft-NMS over all of them). max_per_class still applies afterwards.
  bool class_agnostic = false;
};

// One image. boxes: [N, 4] shared by all classes, or [N, C, 4] per class; scores: [N, C];
// masks: optional [N, ...] or [N, C, ...] carried along. Returns at most max_total detections
// sorted by decreasing score, with boxes, scores, classes (int64 class column) and masks set, and
// the extra field "indices" (int64 source row in [0, N)).
Boxes multiclass_nms(const at::Tensor& boxes, const at::Tensor& scores,
                     const MultiClassNmsOptions& options, const at::Tensor& masks = {});

struct BatchDetections {
  at::Tensor boxes;           // [B, T, 4], zero-padded, T = max_total
  at::Tensor scores;          // [B, T]
  at::Tensor classes;         // [B, T] int64 (0 in padding)
  at::Tensor masks;           // [B, T, ...] when masks were given
  at::Tensor num_detections;  // [B] int64
};

// The batched form: boxes [B, N, 4] or [B, N, C, 4], scores [B, N, C]; num_valid_boxes: optional
// int64 [B], only the first num_valid_boxes[b] rows of image b are considered. max_total must be
// > 0 here (it fixes T).
BatchDetections batch_multiclass_nms(const at::Tensor& boxes, const at::Tensor& scores,
                                     const MultiClassNmsOptions& options,
                                     const at::Tensor& num_valid_boxes = {},
                                     const at::Tensor& masks = {});

struct TopK {
  at::Tensor scores;          // [B, k]
  at::Tensor anchor_indices;  // [B, k] int64 row into the N anchors
  at::Tensor classes;         // [B, k] int64
};

// Top-k (anchor, class) pairs of scores [B, N, K] (logits or probabilities), over all anchors and
// classes at once, sorted by decreasing score; k is capped at N * K.
TopK select_top_k(const at::Tensor& scores, int64_t k);
// The same over per-level outputs [B, N_l, K], concatenated in level order first.
TopK select_top_k(const std::vector<at::Tensor>& level_scores, int64_t k);

}  // namespace detseg

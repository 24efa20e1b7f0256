// Implements: anchor generators: EfficientDet/RetinaNet multi-level anchors and the Object
// Detection API's grid anchor generator (Faster R-CNN). Both return absolute xyxy boxes.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace detseg {

struct MultiLevelAnchorOptions {
  int64_t min_level = 3;
  int64_t max_level = 7;
  int64_t num_scales = 3;  // octave scales 2^(i / num_scales), i = 0..num_scales-1
  // (x, y) multipliers of the base size, EfficientDet's default {(1,1), (1.4,0.7), (0.7,1.4)}.
  std::vector<std::pair<double, double>> aspect_ratios{{1.0, 1.0}, {1.4, 0.7}, {0.7, 1.4}};
  double anchor_scale = 4.0;  // base size = anchor_scale * stride
  int64_t image_height = 512;  // any size: level l has ceil-halved sizes (exactly /2^l on multiples)
  int64_t image_width = 512;
};

// All levels concatenated [sum_l H_l * W_l * A, 4] xyxy, A = num_scales * len(aspect_ratios).
// Order within a level: row y, column x, then anchor a = scale * len(aspect_ratios) + aspect; the
// centre of cell (y, x) at stride s is (x * s + s / 2, y * s + s / 2). This is the order of
// EfficientDet's anchors (and of a head's [B, A*K, H, W] output permuted to [B, H, W, A, K]).
at::Tensor multilevel_anchors(const MultiLevelAnchorOptions& options);
// Anchors per level (same order), e.g. to split dense targets back into levels.
std::vector<at::Tensor> multilevel_anchors_per_level(const MultiLevelAnchorOptions& options);
// Feature size (H_l, W_l) of each level, min_level first.
std::vector<std::pair<int64_t, int64_t>> level_sizes(const MultiLevelAnchorOptions& options);
int64_t anchors_per_location(const MultiLevelAnchorOptions& options);

struct GridAnchorOptions {
  std::vector<double> scales{0.5, 1.0, 2.0};
  std::vector<double> aspect_ratios{0.5, 1.0, 2.0};  // width / height
  std::pair<double, double> base_anchor_size{256, 256};  // (height, width)
  std::pair<double, double> anchor_stride{16, 16};       // (y, x)
  std::pair<double, double> anchor_offset{0, 0};         // (y, x) centre of cell (0, 0)
};

// The OD API's GridAnchorGenerator for one feature map of feature_height x feature_width:
// anchor (scale s, ratio r) has height s / sqrt(r) * base_h and width s * sqrt(r) * base_w (r is
// width / height), centred at (y * stride_y + offset_y, x * stride_x + offset_x). Order: row y,
// column x, then a = ratio_index * len(scales) + scale_index. Returns [H * W * A, 4] xyxy.
at::Tensor grid_anchors(const GridAnchorOptions& options, int64_t feature_height,
                        int64_t feature_width);

// A constant tensor made on the CPU (anchors) and its copies on other devices, each made once.
// Anchors are not module buffers, so model->to(device) leaves them on the CPU; on(device) hands
// out a copy on the features' device without re-copying it every step. Copies of this object
// share the cache; on() is thread-safe.
class DeviceCachedTensor {
 public:
  DeviceCachedTensor() = default;
  explicit DeviceCachedTensor(at::Tensor cpu_value);
  const at::Tensor& cpu() const { return state_->cpu; }
  bool defined() const { return state_ && state_->cpu.defined(); }
  // The value on `device` (the CPU tensor itself for the CPU).
  at::Tensor on(const at::Device& device) const;

 private:
  struct State {
    at::Tensor cpu;
    std::mutex mutex;
    std::vector<std::pair<at::Device, at::Tensor>> copies;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace detseg

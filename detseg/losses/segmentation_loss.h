// Implements: DeepLab's softmax cross-entropy for each output scale (train_utils'
// add_softmax_cross_entropy_loss_for_each_scale): pixels with the ignore label masked out, a loss
// weight, logits upsampled to the labels (bilinear, aligned corners) or labels downsampled to the
// logits (nearest, aligned corners), and hard pixel mining over the top_k_percent_pixels largest
// losses, ramped in over hard_example_mining_step steps. Divisions by an empty count give 0.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <vector>

namespace detseg {

struct SegmentationLossOptions {
  TORCH_ARG(int64_t, ignore_label) = 255;
  TORCH_ARG(double, loss_weight) = 1.0;
  // Per-class weights, one per class (DeepLab's label_weights list): a pixel of class c weighs
  // loss_weight x class_weights[c]. Empty: every class weighs 1.
  TORCH_ARG(std::vector<double>, class_weights);
  TORCH_ARG(bool, upsample_logits) = true;      // false: downsample the labels instead
  TORCH_ARG(double, top_k_percent_pixels) = 1.0;  // 1.0: every pixel (no mining)
  TORCH_ARG(int64_t, hard_example_mining_step) = 0;  // 0: mine top_k from step 0
};

// Pixels kept by the mining at `global_step` out of `num_pixels` (ignored ones included, as the
// reference): top_k_percent x n at once when mining_step is 0, else
// (r x top_k_percent + 1 - r) x n with r = min(1, step / mining_step), truncated (float32 math).
int64_t hard_mining_num_pixels(int64_t num_pixels, double top_k_percent_pixels, int64_t hard_example_mining_step,
                               int64_t global_step);

// tf.image.resize_nearest_neighbor(align_corners=True) of [N, H, W] integer labels to [N, h, w]:
// source index round(i x (H - 1) / (h - 1)).
at::Tensor resize_labels_nearest(const at::Tensor& labels, int64_t height, int64_t width);

// One scale. logits [N, K, h, w] float; labels [N, H, W] int64 (0..K-1 or ignore_label).
// A pixel's weight is loss_weight x class_weights[label] (0 where ignored). Without mining:
// sum(weight x loss) / #(weight != 0). With mining: sum of the k largest weighted pixel losses /
// #(those != 0). A label outside [0, K) other than ignore_label is an Error.
at::Tensor softmax_cross_entropy_loss(const at::Tensor& logits, const at::Tensor& labels,
                                      const SegmentationLossOptions& options, int64_t global_step = 0);

// One loss per entry of `scales_to_logits` (the reference adds each to the total).
std::vector<at::Tensor> softmax_cross_entropy_loss_per_scale(const std::vector<at::Tensor>& scales_to_logits,
                                                             const at::Tensor& labels,
                                                             const SegmentationLossOptions& options,
                                                             int64_t global_step = 0);

}  // namespace detseg

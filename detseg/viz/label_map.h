// Implements: pictures of semantic label maps: DeepLab's PASCAL VOC colour map (class k's RGB from
// the bits of k), a colour image of a label map, and an overlay of it on the photo.
#pragma once

#include <ATen/core/Tensor.h>
#include <opencv2/core.hpp>

#include <array>
#include <cstdint>

namespace detseg {

// DeepLab's create_pascal_label_colormap entry for `label` (RGB): 0 black, 1 (128, 0, 0), ...
std::array<uint8_t, 3> pascal_label_color(int64_t label);

// [H, W] integer labels -> H x W BGR image (CV_8UC3) in the PASCAL colours; `ignore_label` black.
cv::Mat colorize_label_map(const at::Tensor& labels, int64_t ignore_label = 255);

// alpha x colour + (1 - alpha) x image, both BGR of the same size.
cv::Mat overlay_label_map(const cv::Mat& image_bgr, const cv::Mat& colour_bgr, double alpha = 0.5);

}  // namespace detseg

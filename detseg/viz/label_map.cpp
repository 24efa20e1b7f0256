// Implements: colour pictures of label maps (see the header).
#include "detseg/viz/label_map.h"

#include <ATen/ATen.h>
#include <opencv2/core.hpp>

#include "detseg/core/error.h"

namespace detseg {

std::array<uint8_t, 3> pascal_label_color(int64_t label) {
  std::array<int, 3> c = {0, 0, 0};
  int64_t ind = label;
  for (int shift = 7; shift >= 0 && ind > 0; --shift) {
    for (int channel = 0; channel < 3; ++channel) c[channel] |= static_cast<int>((ind >> channel) & 1) << shift;
    ind >>= 3;
  }
  return {static_cast<uint8_t>(c[0]), static_cast<uint8_t>(c[1]), static_cast<uint8_t>(c[2])};
}

cv::Mat colorize_label_map(const at::Tensor& labels, int64_t ignore_label) {
  DETSEG_CHECK(labels.dim() == 2, "colorize_label_map: labels must be [H, W], got ", labels.dim(), " dims");
  const at::Tensor l = labels.to(at::kLong).contiguous();
  const int64_t h = l.size(0), w = l.size(1);
  cv::Mat out(static_cast<int>(h), static_cast<int>(w), CV_8UC3);
  const int64_t* p = l.data_ptr<int64_t>();
  for (int64_t y = 0; y < h; ++y) {
    auto* row = out.ptr<cv::Vec3b>(static_cast<int>(y));
    for (int64_t x = 0; x < w; ++x) {
      const int64_t v = p[y * w + x];
      const auto rgb = v == ignore_label || v < 0 ? std::array<uint8_t, 3>{0, 0, 0} : pascal_label_color(v);
      row[x] = cv::Vec3b(rgb[2], rgb[1], rgb[0]);
    }
  }
  return out;
}

cv::Mat overlay_label_map(const cv::Mat& image_bgr, const cv::Mat& colour_bgr, double alpha) {
  DETSEG_CHECK(image_bgr.size() == colour_bgr.size() && image_bgr.type() == colour_bgr.type(),
               "overlay_label_map: image and label colours differ in size or type");
  cv::Mat out;
  cv::addWeighted(colour_bgr, alpha, image_bgr, 1.0 - alpha, 0.0, out);
  return out;
}

}  // namespace detseg

// Implements: drawing predictions on images for people to look at: boxes with class name and score,
// and (later) masks and label maps. Works on OpenCV BGR images.
#pragma once

#include <opencv2/core.hpp>

#include <string>
#include <vector>

namespace detseg {

struct DrawnBox {
  float x1, y1, x2, y2;  // original-image pixels
  int64_t label;         // contiguous class label, picks the colour
  float score;
  std::string name;      // class name shown in the caption
};

// A distinct colour per label (BGR).
cv::Scalar label_color(int64_t label);

// Draws each box as a rectangle with a filled caption "name 0.87" above it.
void draw_boxes(cv::Mat& image_bgr, const std::vector<DrawnBox>& boxes);

}  // namespace detseg

// Implements: drawing predictions on images for people to look at: boxes with class name and score,
// instance masks, and (later) label maps. Works on OpenCV BGR images.
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

struct DrawnMask {
  cv::Mat mask;   // CV_8U, the image's size, non-zero inside the instance
  int64_t label;  // picks the colour (the same as its box's)
};

// Blends each mask's label colour into the image (alpha of the colour) and outlines it.
void draw_masks(cv::Mat& image_bgr, const std::vector<DrawnMask>& masks, double alpha = 0.45);

}  // namespace detseg

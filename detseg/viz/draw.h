// Implements: drawing predictions on images for people to look at (OpenCV BGR images): boxes in
// ascending score so the best is on top, each with a caption placed inside the image and moved off
// the captions of higher-scoring boxes where it can be, a colour per class with a legend of the
// classes drawn, and instance masks as translucent fills with outlines.
#pragma once

#include <opencv2/core.hpp>

#include <string>
#include <vector>

namespace detseg {

struct DrawnBox {
  float x1, y1, x2, y2;  // original-image pixels
  int64_t label;         // contiguous class label, picks the colour
  float score;           // drawing order (ascending) and caption priority (descending)
  std::string name;      // class name shown in the caption and the legend
  std::string caption = "";  // shown instead of "name 0.87" when not empty
  bool dashed = false;   // a second style (the evaluation gallery's ground truth)
  bool show_caption = true;
};

struct DrawStyle {
  int line_width = 0;  // 0: from the image size, max(1, round(0.003 x mean side)) (Ultralytics' rule)
  bool legend = true;  // the classes drawn, each in its colour, in the corner where it hides least
  double font_scale = 0;  // 0: a third of the line width (at least 0.35)
};

// A distinct colour per label (BGR).
cv::Scalar label_color(int64_t label);

// The line width draw_boxes uses on an image of this size (style.line_width when set).
int line_width_for(cv::Size image, const DrawStyle& style = {});

// Where draw_boxes puts each box's caption (input order; an empty rectangle for a box without
// one): captions are placed best score first, each at the first of its box's corners (above the
// top-left corner, inside it, below the bottom-left, inside it, then the same on the right) that
// lies in the image and overlaps no caption placed before, else where it overlaps them least;
// every rectangle lies inside the image when it fits in it.
std::vector<cv::Rect> layout_captions(cv::Size image, const std::vector<DrawnBox>& boxes, const DrawStyle& style = {});

// Where the legend goes (empty when no box is drawn or it does not fit): a strip of the classes
// drawn, in the corner where it covers the least of the captions (then of the boxes).
cv::Rect layout_legend(cv::Size image, const std::vector<DrawnBox>& boxes, const DrawStyle& style = {});

// Draws the boxes in ascending score (the best on top), then their captions (filled in the class
// colour) in the same order, then the legend.
void draw_boxes(cv::Mat& image_bgr, const std::vector<DrawnBox>& boxes, const DrawStyle& style = {});

struct DrawnMask {
  cv::Mat mask;     // CV_8U, the image's size, non-zero inside the instance
  int64_t label;    // picks the colour (the same as its box's)
  float score = 0;  // drawing order: ascending, so the best mask's fill and outline are on top
};

// Blends each mask's label colour into the image (alpha of the colour) and outlines it, in
// ascending score.
void draw_masks(cv::Mat& image_bgr, const std::vector<DrawnMask>& masks, double alpha = 0.45);

}  // namespace detseg

#include "detseg/viz/draw.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdio>

namespace detseg {

cv::Scalar label_color(int64_t label) {
  // Golden-ratio hue steps give neighbouring labels clearly different colours.
  const double hue = std::fmod(0.11 + 0.618033988749895 * static_cast<double>(label), 1.0) * 180.0;
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hue, 200, 255));
  cv::Mat bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  cv::Vec3b c = bgr.at<cv::Vec3b>(0, 0);
  return cv::Scalar(c[0], c[1], c[2]);
}

void draw_boxes(cv::Mat& image, const std::vector<DrawnBox>& boxes) {
  const int thickness = std::max(1, static_cast<int>(std::round(std::max(image.rows, image.cols) / 400.0)));
  const double font_scale = 0.4 * thickness;
  for (const DrawnBox& b : boxes) {
    cv::Scalar color = label_color(b.label);
    cv::Point p1(static_cast<int>(b.x1), static_cast<int>(b.y1));
    cv::Point p2(static_cast<int>(b.x2), static_cast<int>(b.y2));
    cv::rectangle(image, p1, p2, color, thickness, cv::LINE_AA);
    char caption[128];
    std::snprintf(caption, sizeof(caption), "%s %.2f", b.name.c_str(), b.score);
    int baseline = 0;
    cv::Size text = cv::getTextSize(caption, cv::FONT_HERSHEY_SIMPLEX, font_scale, 1, &baseline);
    int top = std::max(0, p1.y - text.height - baseline - 2);
    cv::rectangle(image, cv::Point(p1.x, top), cv::Point(p1.x + text.width + 2, top + text.height + baseline + 2),
                  color, cv::FILLED);
    cv::putText(image, caption, cv::Point(p1.x + 1, top + text.height + 1), cv::FONT_HERSHEY_SIMPLEX, font_scale,
                cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
  }
}

void draw_masks(cv::Mat& image, const std::vector<DrawnMask>& masks, double alpha) {
  for (const DrawnMask& m : masks) {
    if (m.mask.empty() || m.mask.size() != image.size()) continue;
    const cv::Scalar color = label_color(m.label);
    cv::Mat tinted(image.size(), image.type(), color);
    cv::Mat blended;
    cv::addWeighted(image, 1.0 - alpha, tinted, alpha, 0.0, blended);
    blended.copyTo(image, m.mask);
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(m.mask.clone(), contours, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_SIMPLE);
    cv::drawContours(image, contours, -1, color, 1, cv::LINE_AA);
  }
}

}  // namespace detseg

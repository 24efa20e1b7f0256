// Implements: the drawings declared in draw.h.
#include "detseg/viz/draw.h"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace detseg {
namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

struct TextStyle {
  double scale;
  int thickness;
  int pad;
};

TextStyle text_style(int line_width, const DrawStyle& style) {
  // Ultralytics' proportions: font scale a third of the line width, strokes one thinner.
  const double scale = style.font_scale > 0 ? style.font_scale : std::max(0.35, line_width / 3.0);
  return {scale, std::max(1, line_width - 1), std::max(2, line_width)};
}

std::string caption_of(const DrawnBox& b) {
  if (!b.caption.empty()) return b.caption;
  char text[160];
  std::snprintf(text, sizeof(text), "%s %.2f", b.name.c_str(), b.score);
  return text;
}

cv::Size caption_size(const std::string& text, const TextStyle& t, int* text_height = nullptr, int* baseline = nullptr) {
  int base = 0;
  const cv::Size s = cv::getTextSize(text, kFont, t.scale, t.thickness, &base);
  if (text_height) *text_height = s.height;
  if (baseline) *baseline = base;
  return {s.width + 2 * t.pad, s.height + base + t.pad};
}

// Black text on light colours, white on dark ones.
cv::Scalar text_color_on(const cv::Scalar& bgr) {
  const double luma = 0.114 * bgr[0] + 0.587 * bgr[1] + 0.299 * bgr[2];
  return luma > 140 ? cv::Scalar(0, 0, 0) : cv::Scalar(255, 255, 255);
}

int overlap(const cv::Rect& a, const cv::Rect& b) { return (a & b).area(); }

cv::Rect clamp_into(cv::Rect r, cv::Size image) {
  r.x = std::max(0, std::min(r.x, image.width - r.width));
  r.y = std::max(0, std::min(r.y, image.height - r.height));
  return r;
}

cv::Rect box_rect(const DrawnBox& b) {
  const int x1 = static_cast<int>(std::lround(b.x1)), y1 = static_cast<int>(std::lround(b.y1));
  const int x2 = static_cast<int>(std::lround(b.x2)), y2 = static_cast<int>(std::lround(b.y2));
  return {std::min(x1, x2), std::min(y1, y2), std::abs(x2 - x1), std::abs(y2 - y1)};
}

// Box indices in ascending score (stable: equal scores keep their order).
std::vector<size_t> ascending(const std::vector<DrawnBox>& boxes) {
  std::vector<size_t> order(boxes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return boxes[a].score < boxes[b].score; });
  return order;
}

void dashed_rectangle(cv::Mat& image, const cv::Rect& r, const cv::Scalar& color, int width) {
  const int dash = std::max(4, 3 * width), gap = std::max(3, 2 * width);
  auto dashed_line = [&](cv::Point a, cv::Point b) {
    const double length = std::hypot(b.x - a.x, b.y - a.y);
    if (length <= 0) return;
    for (double s = 0; s < length; s += dash + gap) {
      const double e = std::min(length, s + dash);
      const cv::Point p(static_cast<int>(std::lround(a.x + (b.x - a.x) * s / length)),
                        static_cast<int>(std::lround(a.y + (b.y - a.y) * s / length)));
      const cv::Point q(static_cast<int>(std::lround(a.x + (b.x - a.x) * e / length)),
                        static_cast<int>(std::lround(a.y + (b.y - a.y) * e / length)));
      cv::line(image, p, q, color, width, cv::LINE_8);
    }
  };
  const cv::Point tl = r.tl(), br(r.x + r.width, r.y + r.height);
  dashed_line(tl, {br.x, tl.y});
  dashed_line({br.x, tl.y}, br);
  dashed_line(br, {tl.x, br.y});
  dashed_line({tl.x, br.y}, tl);
}

struct LegendEntry {
  int64_t label;
  std::string name;
};

std::vector<LegendEntry> legend_entries(const std::vector<DrawnBox>& boxes) {
  std::vector<LegendEntry> entries;
  for (const DrawnBox& b : boxes)
    if (std::none_of(entries.begin(), entries.end(), [&](const LegendEntry& e) { return e.label == b.label; }))
      entries.push_back({b.label, b.name});
  std::sort(entries.begin(), entries.end(), [](const LegendEntry& a, const LegendEntry& b) { return a.label < b.label; });
  return entries;
}

// The legend's size: one row of swatch + name entries, or as many rows as the width needs.
struct LegendLayout {
  cv::Size size;
  std::vector<cv::Point> entry_origin;  // top-left of each entry, relative to the legend
  int row_height = 0;
};

LegendLayout legend_layout(const std::vector<LegendEntry>& entries, const TextStyle& t, int max_width) {
  LegendLayout l;
  int text_height = 0, baseline = 0;
  caption_size("Ag", t, &text_height, &baseline);
  l.row_height = text_height + baseline + t.pad;
  int x = t.pad, y = 0, widest = 0;
  for (const LegendEntry& e : entries) {
    const int width = text_height + t.pad + caption_size(e.name, t).width;  // swatch, gap, padded name
    if (x > t.pad && x + width > max_width) {
      x = t.pad;
      y += l.row_height;
    }
    l.entry_origin.push_back({x, y});
    x += width;
    widest = std::max(widest, x);
  }
  l.size = {widest + t.pad, y + l.row_height};
  return l;
}

}  // namespace

cv::Scalar label_color(int64_t label) {
  // Golden-ratio hue steps give neighbouring labels clearly different colours.
  const double hue = std::fmod(0.11 + 0.618033988749895 * static_cast<double>(label), 1.0) * 180.0;
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hue, 200, 255));
  cv::Mat bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  cv::Vec3b c = bgr.at<cv::Vec3b>(0, 0);
  return cv::Scalar(c[0], c[1], c[2]);
}

int line_width_for(cv::Size image, const DrawStyle& style) {
  if (style.line_width > 0) return style.line_width;
  return std::max(1, static_cast<int>(std::lround((image.width + image.height) / 2.0 * 0.003)));
}

std::vector<cv::Rect> layout_captions(cv::Size image, const std::vector<DrawnBox>& boxes, const DrawStyle& style) {
  const TextStyle t = text_style(line_width_for(image, style), style);
  std::vector<cv::Rect> placed(boxes.size());
  std::vector<size_t> order(boxes.size());  // best first (equal scores: the earlier box first)
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return boxes[a].score > boxes[b].score; });
  // Captions for the best kMaxCaptions boxes only: on a crowded picture (thousands of boxes) more
  // would bury the image, and placing each against those already placed is quadratic.
  constexpr size_t kMaxCaptions = 200;
  std::vector<cv::Rect> taken;
  for (size_t i : order) {
    const DrawnBox& b = boxes[i];
    if (!b.show_caption) continue;
    if (taken.size() == kMaxCaptions) break;
    const cv::Size size = caption_size(caption_of(b), t);
    const cv::Rect r = box_rect(b);
    const int left = r.x, right = r.x + r.width - size.width, top = r.y, bottom = r.y + r.height;
    const cv::Point candidates[] = {{left, top - size.height}, {left, top},  {left, bottom}, {left, bottom - size.height},
                                    {right, top - size.height}, {right, top}, {right, bottom}, {right, bottom - size.height}};
    cv::Rect best;
    int64_t best_cost = -1;
    for (const cv::Point& c : candidates) {
      const cv::Rect candidate = clamp_into(cv::Rect(c, size), image);
      int64_t cost = 0;
      for (const cv::Rect& other : taken) cost += overlap(candidate, other);
      if (best_cost < 0 || cost < best_cost) {
        best = candidate;
        best_cost = cost;
      }
      if (cost == 0) break;
    }
    placed[i] = best;
    taken.push_back(best);
  }
  return placed;
}

cv::Rect layout_legend(cv::Size image, const std::vector<DrawnBox>& boxes, const DrawStyle& style) {
  if (!style.legend || boxes.empty()) return {};
  const TextStyle t = text_style(line_width_for(image, style), style);
  const LegendLayout l = legend_layout(legend_entries(boxes), t, image.width);
  // On a small image the legend would hide too much of it.
  if (l.size.width > image.width || l.size.height * 4 > image.height) return {};
  const std::vector<cv::Rect> captions = layout_captions(image, boxes, style);
  const cv::Point corners[] = {{0, image.height - l.size.height},
                               {image.width - l.size.width, image.height - l.size.height},
                               {0, 0},
                               {image.width - l.size.width, 0}};
  cv::Rect best;
  int64_t best_cost = -1;
  for (const cv::Point& c : corners) {
    const cv::Rect candidate(c, l.size);
    int64_t cost = 0;
    for (const cv::Rect& r : captions) cost += 16 * static_cast<int64_t>(overlap(candidate, r));
    for (const DrawnBox& b : boxes) cost += overlap(candidate, box_rect(b));
    if (best_cost < 0 || cost < best_cost) {
      best = candidate;
      best_cost = cost;
    }
  }
  return best;
}

void draw_boxes(cv::Mat& image, const std::vector<DrawnBox>& boxes, const DrawStyle& style) {
  const int width = line_width_for(image.size(), style);
  const TextStyle t = text_style(width, style);
  const std::vector<size_t> order = ascending(boxes);
  for (size_t i : order) {
    const DrawnBox& b = boxes[i];
    const cv::Rect r = box_rect(b);
    if (b.dashed)
      dashed_rectangle(image, r, label_color(b.label), width);
    else
      // Axis-aligned: crisp without anti-aliasing, and each pixel is the class colour.
      cv::rectangle(image, r.tl(), cv::Point(r.x + r.width, r.y + r.height), label_color(b.label), width, cv::LINE_8);
  }
  const std::vector<cv::Rect> captions = layout_captions(image.size(), boxes, style);
  for (size_t i : order) {
    if (captions[i].empty()) continue;
    const DrawnBox& b = boxes[i];
    const cv::Scalar color = label_color(b.label);
    int text_height = 0, baseline = 0;
    caption_size(caption_of(b), t, &text_height, &baseline);
    cv::rectangle(image, captions[i], color, cv::FILLED);
    cv::putText(image, caption_of(b), cv::Point(captions[i].x + t.pad, captions[i].y + t.pad / 2 + text_height), kFont,
                t.scale, text_color_on(color), t.thickness, cv::LINE_AA);
  }
  const cv::Rect legend = layout_legend(image.size(), boxes, style);
  if (legend.empty()) return;
  const std::vector<LegendEntry> entries = legend_entries(boxes);
  const LegendLayout l = legend_layout(entries, t, image.cols);
  // A dark, mostly opaque strip under white names, each after a swatch of its colour.
  cv::Mat region = image(legend);
  cv::Mat dark(region.size(), region.type(), cv::Scalar(30, 30, 30));
  cv::addWeighted(region, 0.25, dark, 0.75, 0.0, region);
  int text_height = 0, baseline = 0;
  caption_size("Ag", t, &text_height, &baseline);
  for (size_t e = 0; e < entries.size(); ++e) {
    const cv::Point o = legend.tl() + l.entry_origin[e];
    const int swatch_top = o.y + (l.row_height - text_height) / 2;
    cv::rectangle(image, cv::Rect(o.x, swatch_top, text_height, text_height), label_color(entries[e].label), cv::FILLED);
    cv::putText(image, entries[e].name, cv::Point(o.x + text_height + 2 * t.pad, o.y + t.pad / 2 + text_height), kFont,
                t.scale, cv::Scalar(255, 255, 255), t.thickness, cv::LINE_AA);
  }
}

void draw_masks(cv::Mat& image, const std::vector<DrawnMask>& masks, double alpha) {
  const int width = line_width_for(image.size());
  std::vector<size_t> order(masks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return masks[a].score < masks[b].score; });
  for (size_t i : order) {
    const DrawnMask& m = masks[i];
    if (m.mask.empty() || m.mask.size() != image.size()) continue;
    const cv::Scalar color = label_color(m.label);
    cv::Mat tinted(image.size(), image.type(), color);
    cv::Mat blended;
    cv::addWeighted(image, 1.0 - alpha, tinted, alpha, 0.0, blended);
    blended.copyTo(image, m.mask);
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(m.mask.clone(), contours, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_SIMPLE);
    cv::drawContours(image, contours, -1, color, width, cv::LINE_AA);
  }
}

}  // namespace detseg

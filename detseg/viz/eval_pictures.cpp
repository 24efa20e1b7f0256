// Implements: the evaluation pictures declared in eval_pictures.h.
#include "detseg/viz/eval_pictures.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/data/image_codec.h"
#include "detseg/viz/draw.h"
#include "detseg/viz/plot.h"

namespace detseg {
namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
const cv::Scalar kBlack(0, 0, 0), kWhite(255, 255, 255);

cv::Size text_size(const std::string& text, double scale, int* baseline = nullptr) {
  int base = 0;
  const cv::Size s = cv::getTextSize(text, kFont, scale, 1, &base);
  if (baseline) *baseline = base;
  return s;
}

void put_text(cv::Mat& image, const std::string& text, cv::Point origin, double scale,
              const cv::Scalar& color = kBlack) {
  cv::putText(image, text, origin, kFont, scale, color, 1, cv::LINE_AA);
}

// Text written bottom to top with its left end at `bottom_left` (rotated 90 degrees).
void put_vertical_text(cv::Mat& image, const std::string& text, cv::Point bottom_left, double scale) {
  int baseline = 0;
  const cv::Size s = text_size(text, scale, &baseline);
  cv::Mat strip(s.height + baseline + 2, s.width + 2, CV_8UC3, kWhite);
  put_text(strip, text, {1, s.height + 1}, scale);
  cv::Mat turned;
  cv::rotate(strip, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
  cv::Rect target(bottom_left.x, bottom_left.y - turned.rows, turned.cols, turned.rows);
  target &= cv::Rect(0, 0, image.cols, image.rows);
  if (target.empty()) return;
  cv::Mat dest = image(target);
  cv::min(dest, turned(cv::Rect(0, turned.rows - target.height, target.width, target.height)), dest);
}

std::string fixed3(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", v);
  return text;
}

void write_png(const std::string& path, const cv::Mat& image) {
  std::vector<uchar> png;
  DETSEG_CHECK(cv::imencode(".png", image, png), path, ": the picture could not be encoded as PNG");
  write_file_atomic(path, std::string(png.begin(), png.end()), Durability::kAtomicOnly);
}

void write_json(const std::string& path, const nlohmann::ordered_json& json) {
  write_file_atomic(path, json.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                    Durability::kAtomicOnly);
}

}  // namespace

cv::Scalar shade_color(double value) {
  const double v = std::clamp(value, 0.0, 1.0);
  // White to #08306b (matplotlib's Blues, as Ultralytics draws its matrix), in BGR.
  return cv::Scalar(255 + (107 - 255) * v, 255 + (48 - 255) * v, 255 + (8 - 255) * v);
}

cv::Mat render_matrix(const MatrixPicture& p) {
  const int rows = static_cast<int>(p.row_names.size()), cols = static_cast<int>(p.column_names.size());
  DETSEG_CHECK(rows > 0 && cols > 0 && p.shade.size() == static_cast<size_t>(rows * cols) &&
                   p.text.size() == p.shade.size(),
               "render_matrix: ", rows, "x", cols, " names for ", p.shade.size(), " cells");
  const int cell = std::clamp(640 / std::max(rows, cols), 16, 72);
  const double name_scale = 0.45, cell_scale = std::min(0.45, cell / 70.0);
  int row_name_width = 0, column_name_width = 0;
  for (const auto& n : p.row_names) row_name_width = std::max(row_name_width, text_size(n, name_scale).width);
  for (const auto& n : p.column_names) column_name_width = std::max(column_name_width, text_size(n, name_scale).width);
  const int left = 30 + row_name_width + 8, top = 40;
  const int width = std::max(left + cols * cell + 20, text_size(p.title, 0.5).width + 20);
  const int height = top + rows * cell + 8 + column_name_width + 30;
  cv::Mat image(height, width, CV_8UC3, kWhite);
  put_text(image, p.title, {10, 24}, 0.5);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      const double v = p.shade[i];
      const cv::Rect box(left + c * cell, top + r * cell, cell, cell);
      cv::rectangle(image, box, std::isfinite(v) ? shade_color(v) : cv::Scalar(235, 235, 235), cv::FILLED);
      const std::string& text = p.text[i];
      if (text.empty()) continue;
      int baseline = 0;
      const cv::Size s = text_size(text, cell_scale, &baseline);
      if (s.width > cell - 2) continue;  // does not fit: the shade alone tells
      put_text(image, text, {box.x + (cell - s.width) / 2, box.y + (cell + s.height) / 2}, cell_scale,
               std::isfinite(v) && v > 0.5 ? kWhite : kBlack);
    }
  cv::rectangle(image, cv::Rect(left, top, cols * cell, rows * cell), cv::Scalar(120, 120, 120), 1);
  for (int r = 0; r < rows; ++r) {
    const cv::Size s = text_size(p.row_names[r], name_scale);
    put_text(image, p.row_names[r], {left - 6 - s.width, top + r * cell + (cell + s.height) / 2}, name_scale);
  }
  for (int c = 0; c < cols; ++c) {
    const cv::Size s = text_size(p.column_names[c], name_scale);
    put_vertical_text(image, p.column_names[c],
                      {left + c * cell + (cell - s.height) / 2 - 1, top + rows * cell + 6 + s.width}, name_scale);
  }
  // Axis names: rows' on the left, read upwards; columns' below the names.
  put_vertical_text(image, p.row_axis, {6, top + (rows * cell + text_size(p.row_axis, 0.5).width) / 2}, 0.5);
  const cv::Size cs = text_size(p.column_axis, 0.5);
  put_text(image, p.column_axis, {left + (cols * cell - cs.width) / 2, height - 10}, 0.5);
  return image;
}

MatrixPicture confusion_picture(const DetectionConfusion& c) {
  MatrixPicture p;
  char title[160];
  std::snprintf(title, sizeof(title), "Confusion matrix: IoU >= %.2f, score >= %.2f (shade: fraction of the column)",
                c.iou_threshold, c.score_threshold);
  p.title = title;
  p.row_axis = "predicted";
  p.column_axis = "true";
  p.row_names = p.column_names = c.names;
  const int64_t n = c.size();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < n; ++col) {
      int64_t column_sum = 0;
      for (int64_t k = 0; k < n; ++k) column_sum += c.at(k, col);
      const int64_t v = c.at(r, col);
      p.shade.push_back(column_sum > 0 ? static_cast<double>(v) / static_cast<double>(column_sum)
                                       : std::numeric_limits<double>::quiet_NaN());
      p.text.push_back(v > 0 ? std::to_string(v) : std::string());
    }
  return p;
}

MatrixPicture ap_by_size_picture(const EvalAnalysis& a) {
  MatrixPicture p;
  // (32x32, not 32^2: the Hershey font has no caret)
  p.title = "AP by object size (IoU 0.50:0.95; area: small < 32x32 px < medium < 96x96 px < large)";
  p.row_axis = "class";
  p.column_axis = "object size";
  p.column_names = {"small", "medium", "large"};
  for (const ClassCurves& c : a.classes) {
    p.row_names.push_back(c.name);
    for (double v : c.ap_by_size) {
      p.shade.push_back(v > -1 ? v : std::numeric_limits<double>::quiet_NaN());
      p.text.push_back(v > -1 ? fixed3(v) : "-");
    }
  }
  return p;
}

MatrixPicture pixel_confusion_picture(const EvalAnalysis& a) {
  MatrixPicture p;
  p.title = "Pixel confusion matrix (each column divided by the true class's pixels)";
  p.row_axis = "predicted";
  p.column_axis = "true";
  p.row_names = p.column_names = a.pixel_classes;
  const size_t n = a.pixel_classes.size();
  std::vector<int64_t> column_sum(n, 0);
  for (size_t t = 0; t < n; ++t)
    for (size_t q = 0; q < n; ++q) column_sum[t] += a.pixel_counts[t * n + q];
  for (size_t q = 0; q < n; ++q)  // row: predicted
    for (size_t t = 0; t < n; ++t) {
      const double v = column_sum[t] > 0 ? static_cast<double>(a.pixel_counts[t * n + q]) / column_sum[t]
                                         : std::numeric_limits<double>::quiet_NaN();
      p.shade.push_back(v);
      char text[16];
      std::snprintf(text, sizeof(text), "%.2f", v);
      p.text.push_back(std::isfinite(v) && v >= 0.005 ? text : "");
    }
  return p;
}

cv::Mat render_pr_curves(const EvalAnalysis& a, bool iou50) {
  std::vector<PlotSeries> series;
  const bool legend_each = a.classes.size() <= 12;  // more would not fit: their lines stay grey
  std::vector<double> mean;
  double ap_sum = 0;
  int with_truth = 0;
  for (const ClassCurves& c : a.classes) {
    const std::vector<double>& precision = iou50 ? c.precision50 : c.precision;
    if (precision.empty()) continue;
    PlotSeries s;
    s.name = c.name + " " + fixed3(iou50 ? c.ap50 : c.ap);
    s.x = a.recall_thresholds;
    s.y = precision;
    s.in_legend = legend_each;
    if (!legend_each) {
      s.color = cv::Scalar(190, 190, 190);
      s.thickness = 1;
    }
    series.push_back(s);
    if (mean.empty()) mean.assign(precision.size(), 0.0);
    for (size_t r = 0; r < precision.size(); ++r) mean[r] += precision[r];
    ap_sum += iou50 ? c.ap50 : c.ap;
    ++with_truth;
  }
  PlotOptions o;
  o.width = 760;
  o.height = 600;
  o.x_lo = o.y_lo = 0;
  o.x_hi = o.y_hi = 1;
  o.legend_bottom_left = true;
  o.x_label = "recall";
  o.y_label = "precision";
  o.title = iou50 ? "Precision-recall at IoU 0.50 (legend: AP50)" : "Precision-recall, mean over IoU 0.50:0.95 (legend: AP)";
  if (with_truth == 0) {
    cv::Mat empty(o.height, o.width, CV_8UC3, kWhite);
    put_text(empty, o.title + ": no class has ground truth", {20, 40}, 0.5);
    return empty;
  }
  for (double& v : mean) v /= with_truth;
  PlotSeries all;
  all.name = "all classes " + fixed3(ap_sum / with_truth);
  all.x = a.recall_thresholds;
  all.y = mean;
  all.color = kBlack;
  all.thickness = 3;
  series.push_back(all);
  return render_plot(series, o);
}

cv::Mat render_gallery(const EvalAnalysis& a) {
  constexpr int kTileSide = 448, kCaption = 22, kColumns = 4, kGap = 4;
  const int n = static_cast<int>(a.gallery.size());
  const int columns = std::min(kColumns, std::max(1, n)), rows = (n + columns - 1) / columns;
  const std::vector<std::string>& names = a.confusion.names;  // classes, then "background"
  auto name_of = [&](int64_t k) { return k < static_cast<int64_t>(names.size()) ? names[k] : std::to_string(k); };
  // The header: what the two styles mean, then the classes in their colours.
  char about[256];
  std::snprintf(about, sizeof(about),
                "The %d images with the most errors (score >= %.2f, IoU >= %.2f): solid = detection, dashed = "
                "ground truth; tags mark the errors: FP = false positive, missed = not found",
                n, a.options.score_threshold, a.options.iou_threshold);
  const int header = 52;
  const int width = std::max(columns * (kTileSide + kGap) + kGap, text_size(about, 0.45).width + 20);
  cv::Mat gallery(header + rows * (kTileSide * 3 / 4 + kCaption + kGap) + kGap, width, CV_8UC3, cv::Scalar(250, 250, 250));
  put_text(gallery, about, {10, 20}, 0.45);
  int x = 10;
  for (size_t k = 0; k + 1 < names.size(); ++k) {
    cv::rectangle(gallery, cv::Rect(x, 30, 14, 14), label_color(static_cast<int64_t>(k)), cv::FILLED);
    put_text(gallery, names[k], {x + 20, 42}, 0.45);
    x += 20 + text_size(names[k], 0.45).width + 16;
  }
  for (int i = 0; i < n; ++i) {
    const GalleryImage& g = a.gallery[static_cast<size_t>(i)];
    const int tile_x = kGap + (i % columns) * (kTileSide + kGap);
    const int tile_y = header + (i / columns) * (kTileSide * 3 / 4 + kCaption + kGap);
    char caption[256];
    std::snprintf(caption, sizeof(caption), "%s: %lld false positive%s, %lld missed", g.file_name.c_str(),
                  static_cast<long long>(g.false_positives), g.false_positives == 1 ? "" : "s",
                  static_cast<long long>(g.misses));
    put_text(gallery, caption, {tile_x, tile_y + 15}, 0.4);
    cv::Mat photo;
    const std::string path = (std::filesystem::path(a.image_dir) / g.file_name).string();
    try {
      photo = read_image_bgr(path);
    } catch (const Error& e) {
      log_warn("evaluation gallery: ", e.what());
    }
    if (photo.empty()) {
      put_text(gallery, "(image not readable)", {tile_x + 10, tile_y + kCaption + 30}, 0.45);
      continue;
    }
    const double scale = std::min(static_cast<double>(kTileSide) / photo.cols,
                                  static_cast<double>(kTileSide * 3 / 4) / photo.rows);
    cv::Mat tile;
    cv::resize(photo, tile, cv::Size(std::max(1, static_cast<int>(std::lround(photo.cols * scale))),
                                     std::max(1, static_cast<int>(std::lround(photo.rows * scale)))),
               0, 0, cv::INTER_AREA);
    std::vector<DrawnBox> boxes;
    auto add = [&](const GalleryBox& b, bool truth) {
      DrawnBox d{static_cast<float>(b.bbox[0] * scale), static_cast<float>(b.bbox[1] * scale),
                 static_cast<float>((b.bbox[0] + b.bbox[2]) * scale), static_cast<float>((b.bbox[1] + b.bbox[3]) * scale),
                 b.k, truth ? (b.error ? 2.0f : -1.0f) : static_cast<float>(b.score), name_of(b.k)};
      char text[160];
      if (truth) {
        std::snprintf(text, sizeof(text), "missed %s", d.name.c_str());
        d.caption = text;
        d.dashed = true;
        d.show_caption = b.error;
      } else {
        std::snprintf(text, sizeof(text), "FP %s %.2f", d.name.c_str(), b.score);
        d.caption = text;
        d.show_caption = b.error;  // only the errors are tagged: a tag on every box hides the image
      }
      boxes.push_back(d);
    };
    for (const GalleryBox& b : g.truth) add(b, true);
    for (const GalleryBox& b : g.detections) add(b, false);
    DrawStyle style;
    style.line_width = 2;
    style.font_scale = 0.4;
    style.legend = false;  // the gallery's header has it
    draw_boxes(tile, boxes, style);
    tile.copyTo(gallery(cv::Rect(tile_x, tile_y + kCaption, tile.cols, tile.rows)));
  }
  return gallery;
}

std::vector<std::string> write_eval_pictures(const EvalAnalysis& a, const std::string& dir) {
  make_directories(dir);
  std::vector<std::string> written;
  auto png = [&](const std::string& name, const cv::Mat& image) {
    write_png(dir + "/" + name, image);
    written.push_back(dir + "/" + name);
  };
  auto json = [&](const std::string& name, const nlohmann::ordered_json& value) {
    write_json(dir + "/" + name, value);
    written.push_back(dir + "/" + name);
  };
  if (a.has_detection()) {
    png("pr_curves_iou50.png", render_pr_curves(a, true));
    png("pr_curves_iou50-95.png", render_pr_curves(a, false));
    json("pr_curves.json", pr_curves_json(a));
    png("confusion_matrix.png", render_matrix(confusion_picture(a.confusion)));
    json("confusion_matrix.json", confusion_json(a.confusion));
    png("ap_by_size.png", render_matrix(ap_by_size_picture(a)));
    json("ap_by_size.json", ap_by_size_json(a));
    json("gallery.json", gallery_json(a));
    if (!a.gallery.empty()) png("gallery.png", render_gallery(a));
  }
  if (a.has_segmentation()) {
    png("pixel_confusion_matrix.png", render_matrix(pixel_confusion_picture(a)));
    json("pixel_confusion_matrix.json", pixel_confusion_json(a));
  }
  return written;
}

PrCurveData pr_curve_data(const ClassCurves& c) {
  PrCurveData d;
  const size_t n = c.sweep_tp.size();
  for (size_t i = 0; i < n; ++i) {
    const double tp = c.sweep_tp[i], fp = c.sweep_fp[i];
    const double fn = static_cast<double>(c.num_truth) - tp, tn = c.sweep_fp[0] - fp;
    d.true_positives.push_back(static_cast<float>(tp));
    d.false_positives.push_back(static_cast<float>(fp));
    d.true_negatives.push_back(static_cast<float>(tn));
    d.false_negatives.push_back(static_cast<float>(fn));
    d.precision.push_back(static_cast<float>(tp / std::max(1e-7, tp + fp)));
    d.recall.push_back(static_cast<float>(tp / std::max(1e-7, tp + fn)));
  }
  return d;
}

void add_pr_curve_summaries(EventWriter& events, const EvalAnalysis& a, const std::string& tag_prefix, int64_t step) {
  for (const ClassCurves& c : a.classes) {
    if (c.num_truth == 0 && (c.sweep_fp.empty() || c.sweep_fp[0] == 0)) continue;
    if (c.sweep_tp.size() < 2) continue;
    events.add_pr_curve(tag_prefix + "pr_iou50/" + c.name, pr_curve_data(c), step, c.name + " (IoU 0.5)",
                        "Detections of " + c.name +
                            " at or above each score threshold, matched to ground truth at IoU 0.5 as COCO's AP50 "
                            "matches them (best 100 per image); recall counts every object of the class");
  }
}

}  // namespace detseg

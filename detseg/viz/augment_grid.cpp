// Implements: the grid picture of augmented examples, drawn with viz/draw.h and viz/label_map.h.
#include "detseg/viz/augment_grid.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/viz/draw.h"
#include "detseg/viz/label_map.h"

namespace detseg {
namespace {

// One example, scaled by `scale`, on its padded canvas (BGR).
cv::Mat draw_example(const Example& ex, double scale, const ExampleGridOptions& o) {
  DETSEG_CHECK(ex.image.defined() && ex.image.dim() == 3 && ex.image.scalar_type() == at::kByte,
               "example grid: image ", ex.image_id, " is not a uint8 [3, H, W] image");
  const int h = static_cast<int>(ex.height()), w = static_cast<int>(ex.width());
  const int canvas_h = static_cast<int>(std::max<int64_t>(ex.height(), ex.canvas_height));
  const int canvas_w = static_cast<int>(std::max<int64_t>(ex.width(), ex.canvas_width));
  at::Tensor bgr = ex.image.flip({0}).permute({1, 2, 0}).contiguous();
  cv::Mat canvas(canvas_h, canvas_w, CV_8UC3, cv::Scalar(o.pad_rgb[2], o.pad_rgb[1], o.pad_rgb[0]));
  cv::Mat(h, w, CV_8UC3, bgr.data_ptr<uint8_t>()).copyTo(canvas(cv::Rect(0, 0, w, h)));
  const cv::Size size(std::max(1, static_cast<int>(std::lround(canvas_w * scale))),
                      std::max(1, static_cast<int>(std::lround(canvas_h * scale))));
  cv::Mat out;
  cv::resize(canvas, out, size, 0, 0, scale < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
  auto plane = [&](const at::Tensor& t) {  // [H, W] uint8 -> the scaled canvas, nearest
    cv::Mat full(canvas_h, canvas_w, CV_8UC1, cv::Scalar(0));
    at::Tensor c = t.to(at::kByte).contiguous();
    cv::Mat(h, w, CV_8UC1, c.data_ptr<uint8_t>()).copyTo(full(cv::Rect(0, 0, w, h)));
    cv::Mat scaled;
    cv::resize(full, scaled, size, 0, 0, cv::INTER_NEAREST);
    return scaled;
  };
  if (ex.label_map.defined()) {
    cv::Mat labels = plane(ex.label_map);
    at::Tensor ids = at::from_blob(labels.data, {labels.rows, labels.cols}, at::kByte).to(at::kLong);
    out = overlay_label_map(out, colorize_label_map(ids), 0.45);
  }
  std::vector<DrawnMask> masks;
  std::vector<DrawnBox> boxes;
  for (int64_t i = 0; i < ex.num_boxes(); ++i) {
    const int64_t label = ex.classes[i].item<int64_t>();
    const auto b = ex.boxes[i];
    const float x1 = b[0].item<float>(), y1 = b[1].item<float>(), x2 = b[2].item<float>(), y2 = b[3].item<float>();
    // Small boxes on top, their captions first.
    const float priority = -(x2 - x1) * (y2 - y1);
    if (ex.masks.defined()) masks.push_back(DrawnMask{plane(ex.masks[i]), label, priority});
    DrawnBox d{static_cast<float>(x1 * scale), static_cast<float>(y1 * scale), static_cast<float>(x2 * scale),
               static_cast<float>(y2 * scale), label, priority, ""};
    d.name = label >= 0 && label < static_cast<int64_t>(o.class_names.size())
                 ? o.class_names[static_cast<size_t>(label)]
                 : std::to_string(label);
    const bool crowd = ex.iscrowd.defined() && ex.iscrowd[i].item<bool>();
    d.caption = crowd ? d.name + " (crowd)" : d.name;
    d.dashed = crowd;
    boxes.push_back(std::move(d));
  }
  if (!masks.empty()) draw_masks(out, masks);
  DrawStyle style;
  style.legend = false;
  if (!boxes.empty()) draw_boxes(out, boxes, style);
  return out;
}

}  // namespace

cv::Mat render_example_grid(const std::vector<Example>& examples, const ExampleGridOptions& o) {
  DETSEG_CHECK(!examples.empty() && o.cell > 0, "example grid: nothing to draw");
  const int n = static_cast<int>(examples.size());
  const int columns = o.columns > 0 ? std::min(o.columns, n) : static_cast<int>(std::ceil(std::sqrt(n)));
  const int rows = (n + columns - 1) / columns;
  constexpr int kGap = 4, kTitle = 18;
  const int cell_h = o.cell + kTitle;
  cv::Mat grid(rows * (cell_h + kGap) + kGap, columns * (o.cell + kGap) + kGap, CV_8UC3, cv::Scalar(40, 40, 40));
  for (int k = 0; k < n; ++k) {
    const Example& ex = examples[static_cast<size_t>(k)];
    const double longer = static_cast<double>(std::max({ex.height(), ex.width(), ex.canvas_height, ex.canvas_width}));
    cv::Mat tile = draw_example(ex, static_cast<double>(o.cell) / longer, o);
    const int x = kGap + (k % columns) * (o.cell + kGap), y = kGap + (k / columns) * (cell_h + kGap);
    const std::string title = "image " + std::to_string(ex.image_id) + "  " + std::to_string(ex.width()) + "x" +
                              std::to_string(ex.height()) + ", " + std::to_string(ex.num_boxes()) + " boxes";
    cv::putText(grid, title, cv::Point(x + 2, y + kTitle - 5), cv::FONT_HERSHEY_SIMPLEX, 0.42,
                cv::Scalar(235, 235, 235), 1, cv::LINE_AA);
    tile.copyTo(grid(cv::Rect(x, y + kTitle, tile.cols, tile.rows)));
  }
  return grid;
}

void write_example_grid(const std::string& path, const std::vector<Example>& examples,
                        const ExampleGridOptions& options) {
  std::vector<uchar> png;
  DETSEG_CHECK(cv::imencode(".png", render_example_grid(examples, options), png), path,
               ": the picture could not be encoded as PNG");
  write_file_atomic(path, std::string(png.begin(), png.end()), Durability::kAtomicOnly);
}

}  // namespace detseg

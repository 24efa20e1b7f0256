// Implements: mosaic, mixup and copy-paste compositing on Examples.
#include "detseg/data/transforms/mix.h"

#include <algorithm>
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/data/transforms/geometry.h"

namespace detseg {
namespace {

constexpr std::array<uint8_t, 3> kGrey = {kMixFill, kMixFill, kMixFill};

at::Tensor cat_or(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return at::cat({a, b}, 0);
}

void check_same_fields(const Example& a, const Example& b, const char* what) {
  DETSEG_CHECK(a.masks.defined() == b.masks.defined() && a.label_map.defined() == b.label_map.defined(), what,
               ": images ", a.image_id, " and ", b.image_id, " disagree on having masks / label maps");
}

// Appends b's instances (boxes, classes, crowd flags, masks) to a's.
void append_instances(Example& a, const Example& b) {
  a.boxes = cat_or(a.boxes, b.boxes);
  a.classes = cat_or(a.classes, b.classes);
  a.iscrowd = cat_or(a.iscrowd, b.iscrowd);
  if (a.masks.defined()) a.masks = at::cat({a.masks, b.masks}, 0);
  a.dropped_boxes += b.dropped_boxes;
}

}  // namespace

void fit_within(Example& ex, int64_t out_h, int64_t out_w) {
  const double h = static_cast<double>(ex.height()), w = static_cast<double>(ex.width());
  const double scale = std::min(static_cast<double>(out_h) / h, static_cast<double>(out_w) / w);
  const int64_t nh = std::clamp<int64_t>(std::lround(h * scale), 1, out_h);
  const int64_t nw = std::clamp<int64_t>(std::lround(w * scale), 1, out_w);
  if (nh != ex.height() || nw != ex.width()) transform_resize(ex, nh, nw);
}

Example mosaic_examples(std::vector<Example> four, int64_t s, int64_t xc, int64_t yc, bool clip_cut) {
  DETSEG_CHECK(four.size() == 4 && s > 0, "mosaic: needs four examples and a positive size");
  for (const Example& e : four) check_same_fields(four[0], e, "mosaic");
  const int64_t canvas = 2 * s, off = s / 2;
  at::Tensor image = at::full({3, s, s}, static_cast<int64_t>(kMixFill), at::kByte);
  at::Tensor label;
  if (four[0].label_map.defined()) label = at::full({s, s}, 255, four[0].label_map.options());
  Example out;
  for (int k = 0; k < 4; ++k) {
    Example& e = four[static_cast<size_t>(k)];
    const int64_t h = e.height(), w = e.width();
    // Where the image lands on the 2s canvas (a) and which part of it does (b): Ultralytics' rule.
    int64_t x1a, y1a, x2a, y2a, x1b, y1b;
    if (k == 0) {
      x1a = std::max<int64_t>(xc - w, 0), y1a = std::max<int64_t>(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a);
    } else if (k == 1) {
      x1a = xc, y1a = std::max<int64_t>(yc - h, 0), x2a = std::min(xc + w, canvas), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a);
    } else if (k == 2) {
      x1a = std::max<int64_t>(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(canvas, yc + h);
      x1b = w - (x2a - x1a), y1b = 0;
    } else {
      x1a = xc, y1a = yc, x2a = std::min(xc + w, canvas), y2a = std::min(canvas, yc + h);
      x1b = 0, y1b = 0;
    }
    // Only the window [off, off + s) is kept: crop each image to its visible part first.
    const int64_t dx1 = std::max(x1a, off), dy1 = std::max(y1a, off);
    const int64_t dx2 = std::min(x2a, off + s), dy2 = std::min(y2a, off + s);
    if (dx2 <= dx1 || dy2 <= dy1) {  // nothing of it shows: its instances go
      const int64_t n = e.num_boxes();
      if (n > 0) select_boxes(e, at::zeros({n}, at::kBool));
      e.dropped_boxes += n;
      if (e.masks.defined()) e.masks = at::zeros({0, s, s}, e.masks.options());
      if (k == 0) {
        out = std::move(e);  // the composite keeps its id and sizes
      } else {
        out.dropped_boxes += e.dropped_boxes;
      }
      continue;
    }
    transform_crop_keep_overlap(e, y1b + (dy1 - y1a), x1b + (dx1 - x1a), dy2 - dy1, dx2 - dx1, 0.0, clip_cut);
    transform_pad_at(e, dy1 - off, dx1 - off, s, s, kGrey, 255);
    image.narrow(1, dy1 - off, dy2 - dy1).narrow(2, dx1 - off, dx2 - dx1)
        .copy_(e.image.narrow(1, dy1 - off, dy2 - dy1).narrow(2, dx1 - off, dx2 - dx1));
    if (label.defined())
      label.narrow(0, dy1 - off, dy2 - dy1).narrow(1, dx1 - off, dx2 - dx1)
          .copy_(e.label_map.narrow(0, dy1 - off, dy2 - dy1).narrow(1, dx1 - off, dx2 - dx1));
    if (k == 0) {
      const int64_t earlier = out.dropped_boxes;
      out = std::move(e);
      out.dropped_boxes += earlier;
    } else {
      append_instances(out, e);
    }
  }
  out.image = image;
  if (label.defined()) out.label_map = label;
  out.canvas_height = out.canvas_width = 0;
  return out;
}

void mixup_examples(Example& ex, const Example& other, double r) {
  check_same_fields(ex, other, "mixup");
  DETSEG_CHECK(ex.height() == other.height() && ex.width() == other.width(), "mixup: the images differ in size (",
               ex.height(), "x", ex.width(), " and ", other.height(), "x", other.width(), ")");
  at::Tensor blend = ex.image.to(at::kFloat).mul_(static_cast<float>(r))
                         .add_(other.image.to(at::kFloat), static_cast<float>(1.0 - r));
  ex.image = blend.round_().clamp_(0, 255).to(at::kByte).contiguous();
  append_instances(ex, other);
}

void copy_paste_examples(Example& ex, const Example& other, const at::Tensor& selected) {
  DETSEG_CHECK(ex.masks.defined() && other.masks.defined(), "copy_paste: needs instance masks");
  DETSEG_CHECK(ex.height() == other.height() && ex.width() == other.width(),
               "copy_paste: the images differ in size");
  const at::Tensor idx = selected.nonzero().squeeze(1);
  if (idx.numel() == 0) return;
  Example pasted;
  pasted.boxes = other.boxes.index_select(0, idx);
  pasted.classes = other.classes.index_select(0, idx);
  pasted.iscrowd = other.iscrowd.defined() ? other.iscrowd.index_select(0, idx) : at::zeros({idx.numel()}, at::kBool);
  pasted.masks = other.masks.index_select(0, idx);
  const at::Tensor cover = pasted.masks.amax(0) > 0;  // [H, W]
  ex.image = at::where(cover.unsqueeze(0), other.image, ex.image).contiguous();
  if (ex.num_boxes() > 0) {
    const at::Tensor before = ex.masks > 0;
    const at::Tensor after = before & cover.logical_not().unsqueeze(0);
    ex.masks = after.to(at::kByte);
    const at::Tensor changed = (before != after).flatten(1).any(1);
    const at::Tensor left = after.flatten(1).any(1);
    // Boxes of the partly covered instances shrink to their remaining pixels.
    at::Tensor boxes = ex.boxes.clone();
    for (int64_t i = 0; i < ex.num_boxes(); ++i) {
      if (!changed[i].item<bool>() || !left[i].item<bool>()) continue;
      const at::Tensor rows = after[i].any(1).nonzero(), cols = after[i].any(0).nonzero();
      boxes[i][0] = cols.min().item<int64_t>();
      boxes[i][1] = rows.min().item<int64_t>();
      boxes[i][2] = cols.max().item<int64_t>() + 1;
      boxes[i][3] = rows.max().item<int64_t>() + 1;
    }
    ex.boxes = boxes;
    const int64_t gone = ex.num_boxes() - left.sum().item<int64_t>();
    if (gone > 0) {
      select_boxes(ex, left);
      ex.dropped_boxes += gone;
    }
  }
  append_instances(ex, pasted);
}

}  // namespace detseg

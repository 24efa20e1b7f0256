// Implements: resize / crop / pad / flip on whole Examples, and the ImageGeometry algebra.
#include "detseg/data/transforms/geometry.h"

#include <opencv2/imgproc.hpp>

#include <cmath>

#include "detseg/core/error.h"

namespace detseg {
namespace {

// Runs `fn(source plane, output plane, plane index)` over each [H, W] plane of a uint8 [C, H, W]
// tensor into a new [C, out_h, out_w] one. Plane by plane, so the channel-first layout never needs a
// transpose for OpenCV.
template <class Fn>
at::Tensor map_planes(const at::Tensor& src, int64_t out_h, int64_t out_w, Fn fn) {
  at::Tensor in = src.contiguous();
  const int64_t c = in.size(0), h = in.size(1), w = in.size(2);
  at::Tensor out = at::empty({c, out_h, out_w}, in.options());
  for (int64_t i = 0; i < c; ++i) {
    cv::Mat a(static_cast<int>(h), static_cast<int>(w), CV_8UC1, in.data_ptr<uint8_t>() + i * h * w);
    cv::Mat b(static_cast<int>(out_h), static_cast<int>(out_w), CV_8UC1, out.data_ptr<uint8_t>() + i * out_h * out_w);
    fn(a, b, i);
  }
  return out;
}

at::Tensor resize_planes(const at::Tensor& src, int64_t out_h, int64_t out_w, int interpolation) {
  return map_planes(src, out_h, out_w,
                    [&](const cv::Mat& a, cv::Mat& b, int64_t) { cv::resize(a, b, b.size(), 0, 0, interpolation); });
}

// Each plane through the inverse map `to_source` (output pixel index -> source pixel index), nearest
// pixel; outside the source: fill(plane index).
template <class Fill>
at::Tensor warp_planes(const at::Tensor& src, const cv::Mat& to_source, Fill fill) {
  return map_planes(src, src.size(1), src.size(2), [&](const cv::Mat& a, cv::Mat& b, int64_t i) {
    cv::warpAffine(a, b, to_source, b.size(), cv::INTER_NEAREST | cv::WARP_INVERSE_MAP, cv::BORDER_CONSTANT,
                   cv::Scalar(fill(i)));
  });
}

void check_example(const Example& ex, const char* what) {
  DETSEG_CHECK(ex.image.defined() && ex.image.dim() == 3 && ex.image.size(0) == 3, what,
               ": expected an image [3, H, W], got ", ex.image.defined() ? str(ex.image.sizes()) : "none");
  DETSEG_CHECK(ex.image.scalar_type() == at::kByte, what, ": expects the uint8 image (transform before normalising)");
}

void compose(Example& ex, const ImageGeometry& g) { ex.geometry = ex.geometry.then(g); }

}  // namespace

ImageGeometry ImageGeometry::then(const ImageGeometry& next) const {
  ImageGeometry g;
  g.scale_x = next.scale_x * scale_x;
  g.scale_y = next.scale_y * scale_y;
  g.offset_x = next.scale_x * offset_x + next.offset_x;
  g.offset_y = next.scale_y * offset_y + next.offset_y;
  return g;
}

at::Tensor geometry_apply_boxes(const ImageGeometry& g, const at::Tensor& boxes) {
  DETSEG_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, "geometry_apply_boxes: expected boxes [N, 4], got ", boxes.sizes());
  if (boxes.size(0) == 0) return boxes.clone();
  at::Tensor x1 = boxes.select(1, 0) * g.scale_x + g.offset_x;
  at::Tensor y1 = boxes.select(1, 1) * g.scale_y + g.offset_y;
  at::Tensor x2 = boxes.select(1, 2) * g.scale_x + g.offset_x;
  at::Tensor y2 = boxes.select(1, 3) * g.scale_y + g.offset_y;
  return at::stack({at::minimum(x1, x2), at::minimum(y1, y2), at::maximum(x1, x2), at::maximum(y1, y2)}, 1);
}

at::Tensor geometry_invert_boxes(const ImageGeometry& g, const at::Tensor& boxes) {
  DETSEG_CHECK(g.scale_x != 0 && g.scale_y != 0, "geometry_invert_boxes: geometry has a zero scale");
  ImageGeometry inv;
  inv.scale_x = 1 / g.scale_x;
  inv.scale_y = 1 / g.scale_y;
  inv.offset_x = -g.offset_x / g.scale_x;
  inv.offset_y = -g.offset_y / g.scale_y;
  return geometry_apply_boxes(inv, boxes);
}

void select_boxes(Example& ex, const at::Tensor& keep) {
  if (keep.all().item<bool>()) return;
  at::Tensor idx = keep.nonzero().squeeze(1);
  ex.boxes = ex.boxes.index_select(0, idx);
  if (ex.classes.defined()) ex.classes = ex.classes.index_select(0, idx);
  if (ex.iscrowd.defined()) ex.iscrowd = ex.iscrowd.index_select(0, idx);
  if (ex.masks.defined()) ex.masks = ex.masks.index_select(0, idx);
}

int64_t clip_and_drop_boxes(Example& ex) {
  if (ex.num_boxes() == 0) return 0;
  const double w = static_cast<double>(ex.width()), h = static_cast<double>(ex.height());
  at::Tensor b = ex.boxes;
  b.select(1, 0).clamp_(0, w);
  b.select(1, 2).clamp_(0, w);
  b.select(1, 1).clamp_(0, h);
  b.select(1, 3).clamp_(0, h);
  at::Tensor keep = (b.select(1, 2) > b.select(1, 0)) & (b.select(1, 3) > b.select(1, 1));
  const int64_t dropped = ex.num_boxes() - keep.sum().item<int64_t>();
  if (dropped > 0) select_boxes(ex, keep);
  ex.dropped_boxes += dropped;
  return dropped;
}

ImageGeometry transform_resize(Example& ex, int64_t out_h, int64_t out_w) {
  check_example(ex, "resize");
  DETSEG_CHECK(out_h > 0 && out_w > 0, "resize: output size must be positive, got ", out_h, "x", out_w);
  ImageGeometry g;
  g.scale_x = static_cast<double>(out_w) / static_cast<double>(ex.width());
  g.scale_y = static_cast<double>(out_h) / static_cast<double>(ex.height());
  if (out_h != ex.height() || out_w != ex.width()) {
    ex.image = resize_planes(ex.image, out_h, out_w, cv::INTER_LINEAR);
    if (ex.masks.defined() && ex.masks.size(0) > 0) ex.masks = resize_planes(ex.masks, out_h, out_w, cv::INTER_NEAREST);
    else if (ex.masks.defined()) ex.masks = at::zeros({0, out_h, out_w}, ex.masks.options());
    if (ex.label_map.defined())
      ex.label_map = resize_planes(ex.label_map.unsqueeze(0), out_h, out_w, cv::INTER_NEAREST).squeeze(0);
  }
  if (ex.num_boxes() > 0) ex.boxes = geometry_apply_boxes(g, ex.boxes);
  ex.canvas_height = ex.canvas_width = 0;
  compose(ex, g);
  return g;
}

ImageGeometry transform_crop(Example& ex, int64_t y0, int64_t x0, int64_t h, int64_t w) {
  check_example(ex, "crop");
  DETSEG_CHECK(y0 >= 0 && x0 >= 0 && h > 0 && w > 0 && y0 + h <= ex.height() && x0 + w <= ex.width(),
               "crop: window y0=", y0, " x0=", x0, " h=", h, " w=", w, " does not fit the image ", ex.height(), "x",
               ex.width());
  ImageGeometry g;
  g.offset_x = -static_cast<double>(x0);
  g.offset_y = -static_cast<double>(y0);
  ex.image = ex.image.narrow(1, y0, h).narrow(2, x0, w).contiguous();
  if (ex.masks.defined()) ex.masks = ex.masks.narrow(1, y0, h).narrow(2, x0, w).contiguous();
  if (ex.label_map.defined()) ex.label_map = ex.label_map.narrow(0, y0, h).narrow(1, x0, w).contiguous();
  if (ex.num_boxes() > 0) {
    ex.boxes = geometry_apply_boxes(g, ex.boxes);
    clip_and_drop_boxes(ex);
  }
  ex.canvas_height = ex.canvas_width = 0;
  compose(ex, g);
  return g;
}

ImageGeometry transform_pad(Example& ex, int64_t out_h, int64_t out_w, std::array<uint8_t, 3> fill,
                            uint8_t label_fill) {
  check_example(ex, "pad");
  const int64_t h = ex.height(), w = ex.width();
  DETSEG_CHECK(out_h >= h && out_w >= w, "pad: target ", out_h, "x", out_w, " is smaller than the image ", h, "x", w);
  if (out_h == h && out_w == w) return ImageGeometry{};
  at::Tensor image = at::empty({3, out_h, out_w}, ex.image.options());
  for (int c = 0; c < 3; ++c) image[c].fill_(static_cast<int64_t>(fill[c]));
  image.narrow(1, 0, h).narrow(2, 0, w).copy_(ex.image);
  ex.image = image;
  if (ex.masks.defined()) {
    at::Tensor masks = at::zeros({ex.masks.size(0), out_h, out_w}, ex.masks.options());
    masks.narrow(1, 0, h).narrow(2, 0, w).copy_(ex.masks);
    ex.masks = masks;
  }
  if (ex.label_map.defined()) {
    at::Tensor label = at::full({out_h, out_w}, static_cast<int64_t>(label_fill), ex.label_map.options());
    label.narrow(0, 0, h).narrow(1, 0, w).copy_(ex.label_map);
    ex.label_map = label;
  }
  return ImageGeometry{};
}

ImageGeometry transform_vflip(Example& ex) {
  check_example(ex, "vflip");
  ImageGeometry g;
  g.scale_y = -1;
  g.offset_y = static_cast<double>(ex.height());
  ex.image = ex.image.flip({1}).contiguous();
  if (ex.masks.defined()) ex.masks = ex.masks.flip({1}).contiguous();
  if (ex.label_map.defined()) ex.label_map = ex.label_map.flip({0}).contiguous();
  if (ex.num_boxes() > 0) ex.boxes = geometry_apply_boxes(g, ex.boxes);
  compose(ex, g);
  return g;
}

void transform_rot90(Example& ex) {
  check_example(ex, "rot90");
  const double w = static_cast<double>(ex.width());
  // new[y'][x'] = old[x'][W - 1 - y']: transpose the plane, then reverse its rows.
  ex.image = ex.image.transpose(1, 2).flip({1}).contiguous();
  if (ex.masks.defined()) ex.masks = ex.masks.transpose(1, 2).flip({1}).contiguous();
  if (ex.label_map.defined()) ex.label_map = ex.label_map.transpose(0, 1).flip({0}).contiguous();
  if (ex.num_boxes() > 0) {
    const at::Tensor b = ex.boxes;
    ex.boxes = at::stack({b.select(1, 1), w - b.select(1, 2), b.select(1, 3), w - b.select(1, 0)}, 1);
  }
  ex.canvas_height = ex.canvas_width = 0;
}

ImageGeometry transform_pad_at(Example& ex, int64_t top, int64_t left, int64_t out_h, int64_t out_w,
                               std::array<uint8_t, 3> fill, uint8_t label_fill) {
  check_example(ex, "pad");
  const int64_t h = ex.height(), w = ex.width();
  DETSEG_CHECK(top >= 0 && left >= 0 && top + h <= out_h && left + w <= out_w, "pad: the ", h, "x", w,
               " image at (", top, ", ", left, ") does not fit ", out_h, "x", out_w);
  ImageGeometry g;
  g.offset_x = static_cast<double>(left);
  g.offset_y = static_cast<double>(top);
  if (out_h != h || out_w != w) {
    at::Tensor image = at::empty({3, out_h, out_w}, ex.image.options());
    for (int c = 0; c < 3; ++c) image[c].fill_(static_cast<int64_t>(fill[c]));
    image.narrow(1, top, h).narrow(2, left, w).copy_(ex.image);
    ex.image = image;
    if (ex.masks.defined()) {
      at::Tensor masks = at::zeros({ex.masks.size(0), out_h, out_w}, ex.masks.options());
      masks.narrow(1, top, h).narrow(2, left, w).copy_(ex.masks);
      ex.masks = masks;
    }
    if (ex.label_map.defined()) {
      at::Tensor label = at::full({out_h, out_w}, static_cast<int64_t>(label_fill), ex.label_map.options());
      label.narrow(0, top, h).narrow(1, left, w).copy_(ex.label_map);
      ex.label_map = label;
    }
  }
  if (ex.num_boxes() > 0 && (top != 0 || left != 0)) ex.boxes = geometry_apply_boxes(g, ex.boxes);
  ex.canvas_height = ex.canvas_width = 0;
  compose(ex, g);
  return g;
}

ImageGeometry transform_crop_keep_overlap(Example& ex, int64_t y0, int64_t x0, int64_t h, int64_t w,
                                         double overlap_thresh, bool clip_cut) {
  if (ex.num_boxes() > 0) {
    const at::Tensor b = ex.boxes;
    const at::Tensor bx1 = b.select(1, 0), by1 = b.select(1, 1), bx2 = b.select(1, 2), by2 = b.select(1, 3);
    const double wx1 = static_cast<double>(x0), wy1 = static_cast<double>(y0);
    const double wx2 = wx1 + static_cast<double>(w), wy2 = wy1 + static_cast<double>(h);
    const at::Tensor iw = (at::clamp_max(bx2, wx2) - at::clamp_min(bx1, wx1)).clamp_min(0);
    const at::Tensor ih = (at::clamp_max(by2, wy2) - at::clamp_min(by1, wy1)).clamp_min(0);
    const at::Tensor area = (bx2 - bx1) * (by2 - by1);
    const at::Tensor inside = iw * ih;
    // The reference prunes boxes wholly outside the window, then those whose IoA is below the threshold.
    at::Tensor keep = (inside > 0) & (inside >= overlap_thresh * area);
    if (!clip_cut) keep = keep & (bx1 >= wx1) & (by1 >= wy1) & (bx2 <= wx2) & (by2 <= wy2);
    const int64_t removed = ex.num_boxes() - keep.sum().item<int64_t>();
    if (removed > 0) {
      select_boxes(ex, keep);
      ex.dropped_boxes += removed;
    }
  }
  return transform_crop(ex, y0, x0, h, w);
}

void transform_affine(Example& ex, const std::array<double, 6>& map, std::array<uint8_t, 3> fill, uint8_t label_fill) {
  check_example(ex, "affine");
  const double a = map[0], b = map[1], tx = map[2], c = map[3], d = map[4], ty = map[5];
  const double det = a * d - b * c;
  DETSEG_CHECK(std::abs(det) > 1e-12, "affine: the map [", a, ", ", b, "; ", c, ", ", d, "] cannot be inverted");
  // Continuous coordinates put pixel i's centre at i + 0.5: source index = A^-1 (index + 0.5 - t) - 0.5.
  const double ia = d / det, ib = -b / det, ic = -c / det, id = a / det;
  const double ux = 0.5 - tx, uy = 0.5 - ty;
  const cv::Mat to_source = (cv::Mat_<double>(2, 3) << ia, ib, ia * ux + ib * uy - 0.5, ic, id, ic * ux + id * uy - 0.5);
  ex.image = warp_planes(ex.image, to_source, [&](int64_t i) { return static_cast<double>(fill[static_cast<size_t>(i)]); });
  if (ex.masks.defined() && ex.masks.size(0) > 0) ex.masks = warp_planes(ex.masks, to_source, [](int64_t) { return 0.0; });
  if (ex.label_map.defined())
    ex.label_map = warp_planes(ex.label_map.unsqueeze(0), to_source, [&](int64_t) { return double(label_fill); }).squeeze(0);
  if (ex.num_boxes() == 0) return;
  const at::Tensor bx = ex.boxes.to(at::kDouble);
  const at::Tensor xs = at::stack({bx.select(1, 0), bx.select(1, 2), bx.select(1, 0), bx.select(1, 2)}, 1);
  const at::Tensor ys = at::stack({bx.select(1, 1), bx.select(1, 1), bx.select(1, 3), bx.select(1, 3)}, 1);
  const at::Tensor mx = xs * a + ys * b + tx, my = xs * c + ys * d + ty;
  ex.boxes = at::stack({std::get<0>(mx.min(1)), std::get<0>(my.min(1)), std::get<0>(mx.max(1)), std::get<0>(my.max(1))}, 1)
                 .to(ex.boxes.scalar_type());
  clip_and_drop_boxes(ex);
}

ImageGeometry transform_hflip(Example& ex) {
  check_example(ex, "hflip");
  ImageGeometry g;
  g.scale_x = -1;
  g.offset_x = static_cast<double>(ex.width());
  ex.image = ex.image.flip({2}).contiguous();
  if (ex.masks.defined()) ex.masks = ex.masks.flip({2}).contiguous();
  if (ex.label_map.defined()) ex.label_map = ex.label_map.flip({1}).contiguous();
  if (ex.num_boxes() > 0) ex.boxes = geometry_apply_boxes(g, ex.boxes);
  compose(ex, g);
  return g;
}

}  // namespace detseg

// Implements: EfficientDet multi-level anchors and the OD API grid anchor generator.
#include "detseg/ops/anchors.h"

#include <cmath>

#include "detseg/core/error.h"

namespace detseg {

namespace {

// Anchors of one feature map: centres cy[H] x cx[W], sizes (h[A], w[A]) -> [H * W * A, 4] xyxy.
at::Tensor tile(const std::vector<double>& cy, const std::vector<double>& cx,
                const std::vector<double>& h, const std::vector<double>& w) {
  const size_t H = cy.size(), W = cx.size(), A = h.size();
  auto out = at::empty({static_cast<int64_t>(H * W * A), 4}, at::kFloat);
  float* p = out.data_ptr<float>();
  for (size_t y = 0; y < H; ++y)
    for (size_t x = 0; x < W; ++x)
      for (size_t a = 0; a < A; ++a, p += 4) {
        p[0] = static_cast<float>(cx[x] - w[a] / 2);
        p[1] = static_cast<float>(cy[y] - h[a] / 2);
        p[2] = static_cast<float>(cx[x] + w[a] / 2);
        p[3] = static_cast<float>(cy[y] + h[a] / 2);
      }
  return out;
}

void check_multilevel(const MultiLevelAnchorOptions& o) {
  DETSEG_CONFIG_CHECK(o.min_level >= 0 && o.max_level >= o.min_level && o.max_level < 31,
                      "anchors: need 0 <= min_level <= max_level < 31, got ", o.min_level, "..",
                      o.max_level);
  DETSEG_CONFIG_CHECK(o.num_scales >= 1, "anchors: num_scales must be >= 1, got ", o.num_scales);
  DETSEG_CONFIG_CHECK(!o.aspect_ratios.empty(), "anchors: aspect_ratios is empty");
  DETSEG_CONFIG_CHECK(o.anchor_scale > 0, "anchors: anchor_scale must be > 0, got ", o.anchor_scale);
  DETSEG_CONFIG_CHECK(o.image_height > 0 && o.image_width > 0, "anchors: image size ", o.image_height, "x",
                      o.image_width, " must be positive");
}

// Size after `level` stride-2 steps of a "same"-padded conv or pool: ceil at every halving, as
// ResNet/FPN produce for any input (320 -> ... -> 10 -> 5 -> 3). Exact 2^-level on multiples.
int64_t halved(int64_t size, int64_t level) {
  for (int64_t l = 0; l < level; ++l) size = (size + 1) / 2;
  return size;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> level_sizes(const MultiLevelAnchorOptions& o) {
  check_multilevel(o);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t l = o.min_level; l <= o.max_level; ++l)
    out.emplace_back(halved(o.image_height, l), halved(o.image_width, l));
  return out;
}

int64_t anchors_per_location(const MultiLevelAnchorOptions& o) {
  return o.num_scales * static_cast<int64_t>(o.aspect_ratios.size());
}

std::vector<at::Tensor> multilevel_anchors_per_level(const MultiLevelAnchorOptions& o) {
  check_multilevel(o);
  std::vector<at::Tensor> levels;
  for (int64_t l = o.min_level; l <= o.max_level; ++l) {
    const double stride = std::ldexp(1.0, static_cast<int>(l));
    std::vector<double> cy, cx, h, w;
    for (int64_t i = 0; i < halved(o.image_height, l); ++i) cy.push_back(stride / 2 + static_cast<double>(i) * stride);
    for (int64_t i = 0; i < halved(o.image_width, l); ++i) cx.push_back(stride / 2 + static_cast<double>(i) * stride);
    for (int64_t s = 0; s < o.num_scales; ++s) {
      const double base =
          o.anchor_scale * stride * std::pow(2.0, static_cast<double>(s) / o.num_scales);
      for (const auto& ar : o.aspect_ratios) {
        w.push_back(base * ar.first);
        h.push_back(base * ar.second);
      }
    }
    levels.push_back(tile(cy, cx, h, w));
  }
  return levels;
}

at::Tensor multilevel_anchors(const MultiLevelAnchorOptions& o) {
  return at::cat(multilevel_anchors_per_level(o), 0);
}

at::Tensor grid_anchors(const GridAnchorOptions& o, int64_t feature_height, int64_t feature_width) {
  DETSEG_CONFIG_CHECK(!o.scales.empty() && !o.aspect_ratios.empty(),
                      "grid anchors: scales and aspect_ratios must be non-empty");
  DETSEG_CHECK(feature_height >= 0 && feature_width >= 0, "grid anchors: bad feature size ",
               feature_height, "x", feature_width);
  std::vector<double> cy, cx, h, w;
  for (int64_t y = 0; y < feature_height; ++y)
    cy.push_back(y * o.anchor_stride.first + o.anchor_offset.first);
  for (int64_t x = 0; x < feature_width; ++x)
    cx.push_back(x * o.anchor_stride.second + o.anchor_offset.second);
  for (double r : o.aspect_ratios) {
    DETSEG_CONFIG_CHECK(r > 0, "grid anchors: aspect ratios must be > 0, got ", r);
    for (double s : o.scales) {
      h.push_back(s / std::sqrt(r) * o.base_anchor_size.first);
      w.push_back(s * std::sqrt(r) * o.base_anchor_size.second);
    }
  }
  return tile(cy, cx, h, w);
}

DeviceCachedTensor::DeviceCachedTensor(at::Tensor cpu_value) {
  DETSEG_CHECK(!cpu_value.defined() || cpu_value.device().is_cpu(),
               "DeviceCachedTensor: expected a CPU tensor, got one on ", cpu_value.device());
  state_->cpu = std::move(cpu_value);
}

at::Tensor DeviceCachedTensor::on(const at::Device& device) const {
  if (device.is_cpu() || !state_->cpu.defined()) return state_->cpu;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const auto& kv : state_->copies)
    if (kv.first == device) return kv.second;
  at::Tensor copy = state_->cpu.to(device);
  state_->copies.emplace_back(device, copy);
  return copy;
}

}  // namespace detseg

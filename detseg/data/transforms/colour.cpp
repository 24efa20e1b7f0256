// Implements: colour and pixel-noise operations on uint8 RGB images, as loops over the planes
// (lookup tables where a pixel's result depends on its own value only).
#include "detseg/data/transforms/colour.h"

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "detseg/core/error.h"

namespace detseg {
namespace {

uint8_t to_byte(double unit) {
  return static_cast<uint8_t>(std::lround(std::clamp(unit, 0.0, 1.0) * 255.0));
}

int64_t plane_size(const at::Tensor& image, const char* what) {
  DETSEG_CHECK(image.defined() && image.dim() == 3 && image.size(0) == 3 && image.scalar_type() == at::kByte &&
                   image.is_contiguous() && image.device().is_cpu(),
               what, ": expected a contiguous CPU uint8 image [3, H, W]");
  return image.size(1) * image.size(2);
}

// Applies `fn` (r, g, b in [0, 1], changed in place) to every pixel.
template <class Fn>
void for_each_pixel(at::Tensor& image, const char* what, Fn fn) {
  const int64_t n = plane_size(image, what);
  uint8_t* r = image.data_ptr<uint8_t>();
  uint8_t* g = r + n;
  uint8_t* b = g + n;
  constexpr float kInv = 1.0f / 255.0f;
  for (int64_t i = 0; i < n; ++i) {
    float rf = static_cast<float>(r[i]) * kInv, gf = static_cast<float>(g[i]) * kInv, bf = static_cast<float>(b[i]) * kInv;
    fn(rf, gf, bf);
    r[i] = static_cast<uint8_t>(std::lround(std::clamp(rf, 0.0f, 1.0f) * 255.0f));
    g[i] = static_cast<uint8_t>(std::lround(std::clamp(gf, 0.0f, 1.0f) * 255.0f));
    b[i] = static_cast<uint8_t>(std::lround(std::clamp(bf, 0.0f, 1.0f) * 255.0f));
  }
}

}  // namespace

void rgb_to_hsv(float r, float g, float b, float& h, float& s, float& v) {
  v = std::max({r, g, b});
  const float range = v - std::min({r, g, b});
  s = v > 0 ? range / v : 0.0f;
  if (range <= 0) {
    h = 0;
    return;
  }
  if (v == r) h = (g - b) / range;
  else if (v == g) h = 2.0f + (b - r) / range;
  else h = 4.0f + (r - g) / range;
  h /= 6.0f;
  if (h < 0) h += 1.0f;
}

void hsv_to_rgb(float h, float s, float v, float& r, float& g, float& b) {
  const float h6 = (h - std::floor(h)) * 6.0f;
  const float sector = std::floor(h6);
  const float f = h6 - sector;
  const float p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  switch (static_cast<int>(sector) % 6) {
    case 0: r = v, g = t, b = p; break;
    case 1: r = q, g = v, b = p; break;
    case 2: r = p, g = v, b = t; break;
    case 3: r = p, g = q, b = v; break;
    case 4: r = t, g = p, b = v; break;
    default: r = v, g = p, b = q; break;
  }
}

void adjust_brightness(at::Tensor& image, double delta) {
  const int64_t n = plane_size(image, "adjust_brightness");
  std::array<uint8_t, 256> lut;
  for (int x = 0; x < 256; ++x) lut[x] = to_byte(x / 255.0 + delta);
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int64_t i = 0; i < 3 * n; ++i) p[i] = lut[p[i]];
}

void adjust_contrast(at::Tensor& image, double factor) {
  const int64_t n = plane_size(image, "adjust_contrast");
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int c = 0; c < 3; ++c) {
    uint8_t* plane = p + c * n;
    int64_t sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += plane[i];
    const double mean = n > 0 ? static_cast<double>(sum) / static_cast<double>(n) / 255.0 : 0.0;
    std::array<uint8_t, 256> lut;
    for (int x = 0; x < 256; ++x) lut[x] = to_byte((x / 255.0 - mean) * factor + mean);
    for (int64_t i = 0; i < n; ++i) plane[i] = lut[plane[i]];
  }
}

void adjust_hue(at::Tensor& image, double delta) {
  const float d = static_cast<float>(delta);
  for_each_pixel(image, "adjust_hue", [d](float& r, float& g, float& b) {
    float h, s, v;
    rgb_to_hsv(r, g, b, h, s, v);
    h += d;
    h -= std::floor(h);
    hsv_to_rgb(h, s, v, r, g, b);
  });
}

void adjust_saturation(at::Tensor& image, double factor) {
  const float f = static_cast<float>(factor);
  for_each_pixel(image, "adjust_saturation", [f](float& r, float& g, float& b) {
    float h, s, v;
    rgb_to_hsv(r, g, b, h, s, v);
    hsv_to_rgb(h, std::clamp(s * f, 0.0f, 1.0f), v, r, g, b);
  });
}

void rgb_to_gray(at::Tensor& image) {
  for_each_pixel(image, "rgb_to_gray", [](float& r, float& g, float& b) {
    const float y = 0.2989f * r + 0.5870f * g + 0.1140f * b;
    r = g = b = y;
  });
}

void scale_pixel_values(at::Tensor& image, double lo, double hi, std::mt19937_64& rng) {
  const int64_t n = plane_size(image, "pixel_value_scale");
  std::uniform_real_distribution<double> factor(lo, hi);
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int64_t i = 0; i < 3 * n; ++i)
    p[i] = static_cast<uint8_t>(std::lround(std::clamp(p[i] * factor(rng), 0.0, 255.0)));
}

void jpeg_round_trip(at::Tensor& image, int quality) {
  plane_size(image, "jpeg_quality");
  const int h = static_cast<int>(image.size(1)), w = static_cast<int>(image.size(2));
  // OpenCV's codec takes interleaved BGR.
  at::Tensor bgr = image.flip({0}).permute({1, 2, 0}).contiguous();
  cv::Mat mat(h, w, CV_8UC3, bgr.data_ptr<uint8_t>());
  std::vector<uchar> bytes;
  DETSEG_CHECK(cv::imencode(".jpg", mat, bytes, {cv::IMWRITE_JPEG_QUALITY, std::clamp(quality, 0, 100)}),
               "random_jpeg_quality: JPEG encoding failed");
  cv::Mat decoded = cv::imdecode(bytes, cv::IMREAD_COLOR);
  DETSEG_CHECK(!decoded.empty() && decoded.rows == h && decoded.cols == w, "random_jpeg_quality: JPEG decoding failed");
  at::Tensor back = at::from_blob(decoded.data, {h, w, 3}, at::kByte).permute({2, 0, 1}).flip({0});
  image.copy_(back);
}

void add_patch_gaussian(at::Tensor& image, int64_t cy, int64_t cx, int64_t size, double sigma, std::mt19937_64& rng) {
  const int64_t n = plane_size(image, "patch_gaussian");
  const int64_t h = image.size(1), w = image.size(2);
  const int64_t y0 = std::max<int64_t>(0, cy - size / 2), x0 = std::max<int64_t>(0, cx - size / 2);
  const int64_t y1 = std::min(h, cy - size / 2 + size), x1 = std::min(w, cx - size / 2 + size);
  if (sigma <= 0 || y1 <= y0 || x1 <= x0) return;
  std::normal_distribution<double> noise(0.0, sigma);
  uint8_t* p = image.data_ptr<uint8_t>();
  for (int c = 0; c < 3; ++c)
    for (int64_t y = y0; y < y1; ++y) {
      uint8_t* row = p + c * n + y * w;
      for (int64_t x = x0; x < x1; ++x) row[x] = to_byte(row[x] / 255.0 + noise(rng));
    }
}

void fill_rectangle(at::Tensor& image, int64_t y0, int64_t x0, int64_t y1, int64_t x1, uint8_t value) {
  plane_size(image, "fill_rectangle");
  const int64_t h = image.size(1), w = image.size(2);
  y1 = std::min(h, y1), x1 = std::min(w, x1);
  y0 = std::max<int64_t>(0, y0), x0 = std::max<int64_t>(0, x0);
  if (y1 > y0 && x1 > x0) image.narrow(1, y0, y1 - y0).narrow(2, x0, x1 - x0).fill_(static_cast<int64_t>(value));
}

void black_patch(at::Tensor& image, int64_t y, int64_t x, int64_t size) { fill_rectangle(image, y, x, y + size, x + size, 0); }

}  // namespace detseg

// Implements: the colour and pixel-noise operations of the augmentation steps on a uint8 RGB image
// [3, H, W], each on the [0, 1] scale of the reference's formulas (tf.image.adjust_* on image / 255)
// and rounded back to 8 bits. Deterministic given their arguments; the random draws live in
// steps.cpp. Each writes the image in place (it must be contiguous and owned by the caller).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <random>

namespace detseg {

// x + delta, clipped to [0, 1] (tf.image.adjust_brightness).
void adjust_brightness(at::Tensor& image, double delta);
// Per channel (x - mean) * factor + mean, mean over that channel's pixels, clipped
// (tf.image.adjust_contrast).
void adjust_contrast(at::Tensor& image, double factor);
// HSV hue + delta (in turns, modulo 1) (tf.image.adjust_hue).
void adjust_hue(at::Tensor& image, double delta);
// HSV saturation * factor, clipped to [0, 1] (tf.image.adjust_saturation).
void adjust_saturation(at::Tensor& image, double factor);
// R, G, B <- 0.2989 R + 0.5870 G + 0.1140 B (tf.image.rgb_to_grayscale, replicated to 3 channels).
void rgb_to_gray(at::Tensor& image);
// Every value times its own U(lo, hi), clipped to [0, 255] (random_pixel_value_scale).
void scale_pixel_values(at::Tensor& image, double lo, double hi, std::mt19937_64& rng);
// Encodes as JPEG at `quality` (0-100) and decodes back (OpenCV's libjpeg).
void jpeg_round_trip(at::Tensor& image, int quality);
// Adds N(0, sigma^2) on the [0, 1] scale, clipped, inside the square of side `size` whose
// top-left is (cy - size / 2, cx - size / 2) (clipped to the image): the reference's get_patch_mask.
void add_patch_gaussian(at::Tensor& image, int64_t cy, int64_t cx, int64_t size, double sigma,
                        std::mt19937_64& rng);
// Sets the square [y, y + size) x [x, x + size) (clipped to the image) to black.
void black_patch(at::Tensor& image, int64_t y, int64_t x, int64_t size);
// Sets [y0, y1) x [x0, x1) (clipped to the image) to `value` in every channel.
void fill_rectangle(at::Tensor& image, int64_t y0, int64_t x0, int64_t y1, int64_t x1, uint8_t value);

// One pixel's RGB in [0, 1] to HSV (h in turns [0, 1)) and back: TF's conversion.
void rgb_to_hsv(float r, float g, float b, float& h, float& s, float& v);
void hsv_to_rgb(float h, float s, float v, float& r, float& g, float& b);

}  // namespace detseg

// Implements: image decoding into torch tensors, with errors that name the file. The pixels come
// from image_codec.h's one decode path (JPEG and PNG through libjpeg and libpng, BMP and PNM through
// OpenCV), turned upright by the EXIF orientation as PIL's ImageOps.exif_transpose (Ultralytics)
// and detectron2's read_image do: annotations are in the upright image's pixels. Grayscale and RGBA
// become RGB.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "detseg/data/image_codec.h"  // max_image_pixels, image_header_size, decode_image_file

namespace detseg {

// Reads and decodes an image file. Returns [3, H, W] uint8 RGB, contiguous, upright.
// Throws Error naming `path` when it is missing, unreadable, not an image, or too damaged to use
// (image_codec.h); a usable image decoded with a problem is logged once, as a warning naming it.
// `orientation`, when given, receives the EXIF orientation that was applied (1: none).
at::Tensor read_image(const std::string& path, int* orientation = nullptr);

// Decodes encoded bytes; `name` is used in messages.
at::Tensor decode_image(const std::string& bytes, const std::string& name, int* orientation = nullptr);

// An 8-bit BGR cv::Mat (image_codec.h's) as [3, H, W] uint8 RGB.
at::Tensor rgb_tensor_from_bgr(const cv::Mat& bgr);

// Reads a single-channel 8-bit PNG label map (class index per pixel). Returns [H, W] uint8.
// A colour or 16-bit PNG is an error naming the file.
at::Tensor read_label_png(const std::string& path);

// Encodes [3, H, W] uint8 RGB (or [H, W] uint8) as PNG or JPEG by the extension of `path` and
// writes it atomically. Used by tests and the demo-set tools.
void write_image(const std::string& path, const at::Tensor& image);

}  // namespace detseg

// Implements: image decoding (JPEG, PNG via OpenCV imgcodecs) into torch tensors, with errors that
// name the file. Grayscale and RGBA become RGB; EXIF orientation is ignored so pixels line up with
// annotations made on the stored raster (as pycocotools/PIL see it).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "detseg/data/image_codec.h"  // max_image_pixels, image_header_size

namespace detseg {

// Reads and decodes an image file. Returns [3, H, W] uint8 RGB, contiguous.
// Throws Error naming `path` when it is missing, unreadable, not an image, or a truncated JPEG.
at::Tensor read_image(const std::string& path);

// Decodes encoded bytes; `name` is used in error messages.
at::Tensor decode_image(const std::string& bytes, const std::string& name);

// Reads a single-channel 8-bit PNG label map (class index per pixel). Returns [H, W] uint8.
// A colour or 16-bit PNG is an error naming the file.
at::Tensor read_label_png(const std::string& path);

// Encodes [3, H, W] uint8 RGB (or [H, W] uint8) as PNG or JPEG by the extension of `path` and
// writes it atomically. Used by tests and the demo-set tools.
void write_image(const std::string& path, const at::Tensor& image);

}  // namespace detseg

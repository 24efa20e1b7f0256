// Implements: the torch-free half of image reading (OpenCV and libpng): the checks made on encoded
// bytes before any pixel is decoded (the size in the header against max_image_pixels, truncated
// JPEGs), label map decoding, and the label-value check of segmentation data sets. Apart from
// image_io.h so the exact code that reads image and label files is fuzzed and sanitized without
// LibTorch (fuzz/); image_io.h's decode_image and read_label_png and SegmentationDataset use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/readers/image_header.h"  // image_header_size

namespace detseg {

// Images above this many pixels are refused before any pixel is decoded (default 178956970, the
// size at which PIL raises DecompressionBombError): a small file whose header claims a huge raster
// must not allocate gigabytes. The config's `max_image_pixels` sets it.
constexpr int64_t kDefaultMaxImagePixels = 178956970;
void set_max_image_pixels(int64_t pixels);
int64_t max_image_pixels();

// The encoded formats detseg reads, told by their first bytes: those whose header size is checked
// (image_header.h). Only they reach cv::imdecode, which would otherwise hand bytes to whichever of
// OpenCV's decoders claims them, and some abort the process on malformed input (Debian's OpenCV
// reads DICOM through GDCM, which asserts).
enum class ImageFormat { kOther, kJpeg, kPng, kBmp, kPnm };
ImageFormat image_format(const std::string& bytes);

// Throws Error naming `name` when the header claims more than max_image_pixels() pixels.
void check_image_size(const std::string& bytes, const std::string& name);

// What decode_image checks before decoding: bytes present and of a format above, the size, a
// JPEG's end marker.
void check_encoded_image(const std::string& bytes, const std::string& name);

// A decoded label map: height x width class ids, row-major.
struct LabelImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;
};

// Decodes a label map file's bytes (what image_io.h's read_label_png reads): PNGs with libpng, so
// a palette PNG gives its indices; the other formats above through OpenCV. Throws Error naming
// `name` when the bytes are no image of those formats, the header claims too many pixels, or the image is not one 8-bit channel
// (a colour or 16-bit PNG is a common mistake).
LabelImage decode_label_png(const std::string& bytes, const std::string& name);

// Which raw label values a data set accepts and what they become: ids below num_classes (any id
// when num_classes <= 0) and the ignore label 255 stay as they are; void values become 255.
class LabelValues {
 public:
  // Throws Error for a void value outside 0..255.
  LabelValues(int64_t num_classes, const std::vector<int>& void_values);
  // Maps `label` in place; throws Error naming `name` and the first pixel that is neither a class
  // id nor void/ignore.
  void apply(LabelImage& label, const std::string& name) const;
  void apply(uint8_t* pixels, int64_t height, int64_t width, const std::string& name) const;

 private:
  int64_t num_classes_;
  uint8_t lut_[256];  // raw pixel value -> label
  bool valid_[256];   // raw values allowed in a label file
};

}  // namespace detseg

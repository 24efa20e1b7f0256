// Implements: the torch-free half of image reading: the one decode path of every image detseg reads
// (training, evaluation, check-data, predict and its drawings), label map decoding, and the
// label-value check of segmentation data sets. JPEGs are decoded with libjpeg and PNGs with libpng
// directly, each with handlers of our own, so their warnings become one line of ours naming the file
// instead of the libraries' text on stderr; BMP and PNM go through OpenCV. Every image is then turned
// upright by its EXIF orientation. Apart from image_io.h so the exact code that reads image and label
// files is fuzzed and sanitized without LibTorch (fuzz/); image_io.h and SegmentationDataset use it.
#pragma once

#include <opencv2/core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/readers/image_header.h"  // image_header_size, exif_orientation

namespace detseg {

// Images above this many pixels are refused before any pixel is decoded (default 178956970, the
// size at which PIL raises DecompressionBombError): a small file whose header claims a huge raster
// must not allocate gigabytes. The config's `max_image_pixels` sets it.
constexpr int64_t kDefaultMaxImagePixels = 178956970;
void set_max_image_pixels(int64_t pixels);
int64_t max_image_pixels();

// A JPEG whose data stops early (or is corrupt from some row on) is decoded with the rest grey, as
// libjpeg does, and used with a warning while at most this fraction of its rows is lost; beyond it
// the image is undecodable.
constexpr double kMaxLostJpegRows = 0.05;

// The encoded formats detseg reads, told by their first bytes: those whose header size is checked
// (image_header.h). Only BMP and PNM reach cv::imdecode, which would otherwise hand bytes to
// whichever of OpenCV's decoders claims them, and some abort the process on malformed input
// (Debian's OpenCV reads DICOM through GDCM, which asserts).
enum class ImageFormat { kOther, kJpeg, kPng, kBmp, kPnm };
ImageFormat image_format(const std::string& bytes);

// Throws Error naming `name` when the header claims more than max_image_pixels() pixels.
void check_image_size(const std::string& bytes, const std::string& name);

// What decode_image_file checks before decoding: bytes present and of a format above, the size.
void check_encoded_image(const std::string& bytes, const std::string& name);

// One decoded image and what decoding it found. `warning` and `error` are single lines in our own
// words that start with `name`.
struct DecodedImage {
  cv::Mat bgr;                 // 8-bit, 3 channels BGR, upright; empty when `error` is set
  int orientation = 1;         // the EXIF orientation applied (1: none; 5..8 swapped width and height)
  int64_t stored_width = 0;    // the raster as stored in the file, before the orientation
  int64_t stored_height = 0;
  std::string warning;         // decoded and usable, but not cleanly (e.g. a JPEG without its end marker)
  std::string error;           // not usable (not an image, corrupt, too large, too much of it missing)
};

// The one decode path. Never throws for bad bytes: the problem is in `error` (only running out of
// memory throws). Pixels equal cv::imdecode's with IMREAD_COLOR | IMREAD_IGNORE_ORIENTATION
// before the EXIF orientation is applied as PIL's ImageOps.exif_transpose applies it.
DecodedImage decode_image_file(const std::string& bytes, const std::string& name);

// decode_image_file for use: throws Error on its `error`; logs its `warning` once per name in this
// process (a training run reads each image once per epoch). `orientation`, when given, receives the
// EXIF orientation applied.
cv::Mat decode_image_bgr(const std::string& bytes, const std::string& name, int* orientation = nullptr);
// Reads `path` and decodes it as above: what predict draws on and the tensors of image_io.h hold.
cv::Mat read_image_bgr(const std::string& path, int* orientation = nullptr);

// Logs `message` as a warning the first time `key` is given in this process; true when it did.
bool log_warn_once(const std::string& key, const std::string& message);

// "EXIF orientation 6 makes it 480x640": for size messages (empty for orientation 1).
std::string orientation_note(int orientation, int64_t width, int64_t height);

// A decoded label map: height x width class ids, row-major.
struct LabelImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;
  std::string warning;  // as DecodedImage::warning
};

// Decodes a label map file's bytes (what image_io.h's read_label_png reads): PNGs with libpng, so
// a palette PNG gives its indices; BMP and PNM through OpenCV. Turned upright by its EXIF
// orientation, as images are. Throws Error naming `name` when the bytes are no image of those
// formats, the header claims too many pixels, or the image is not one 8-bit channel (a colour or
// 16-bit PNG is a common mistake).
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

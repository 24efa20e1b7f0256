// Implements: the torch-free half of image reading (see image_codec.h).
#include "detseg/data/image_codec.h"

#include <opencv2/imgcodecs.hpp>
#include <png.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/data/readers/image_header.h"
#include "detseg/data/readers/seg_folder.h"

namespace detseg {
namespace {

bool is_jpeg(const std::string& bytes) {
  return bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
         static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF;
}

// libjpeg decodes a truncated JPEG into a grey-filled image with only a warning on stderr, so
// check for the end-of-image marker ourselves. Some writers append a few bytes after it.
bool jpeg_has_end_marker(const std::string& bytes) {
  size_t stop = bytes.size() > 4096 ? bytes.size() - 4096 : 0;
  for (size_t i = bytes.size() - 1; i > stop; --i) {
    if (static_cast<unsigned char>(bytes[i - 1]) == 0xFF && static_cast<unsigned char>(bytes[i]) == 0xD9)
      return true;
  }
  return false;
}

std::atomic<int64_t> g_max_image_pixels{kDefaultMaxImagePixels};

bool is_png(const std::string& b) { return b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0; }

struct PngSamples {
  std::vector<uint8_t> pixels;  // one byte per pixel: a palette index or an 8-bit grey value
  uint32_t width = 0, height = 0;
  int color_type = -1, bit_depth = 0;
  char error[200] = {0};
};

struct PngSource {
  const unsigned char* data;
  size_t size, offset;
};

void read_png_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->offset + n > source->size) png_error(png, "truncated file");
  std::memcpy(out, source->data + source->offset, n);
  source->offset += n;
}

void record_png_error(png_structp png, png_const_charp message) {
  auto* samples = static_cast<PngSamples*>(png_get_error_ptr(png));
  std::snprintf(samples->error, sizeof(samples->error), "%s", message);
  png_longjmp(png, 1);
}

// libpng's classic API, because it hands out the stored samples: a palette image's indices
// (OpenCV would turn them into the palette's colours). No C++ object lives across the setjmp.
bool read_png_samples(const std::string& bytes, PngSamples& out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &out, record_png_error, nullptr);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  PngSource source{reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), 0};
  std::vector<png_bytep> rows;
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, &source, read_png_bytes);
  png_read_info(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  out.color_type = png_get_color_type(png, info);
  out.bit_depth = png_get_bit_depth(png, info);
  const bool single = out.color_type == PNG_COLOR_TYPE_PALETTE || (out.color_type == PNG_COLOR_TYPE_GRAY && out.bit_depth <= 8);
  if (single) {
    png_set_packing(png);  // 1, 2 and 4-bit samples one per byte, values unchanged
    png_read_update_info(png, info);
    out.pixels.resize(static_cast<size_t>(out.width) * out.height);
    rows.resize(out.height);
    for (uint32_t y = 0; y < out.height; ++y) rows[y] = out.pixels.data() + static_cast<size_t>(y) * out.width;
    png_read_image(png, rows.data());
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

cv::Mat wrap_bytes(const std::string& bytes) {
  return cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                 const_cast<char*>(bytes.data()));  // imdecode only reads
}

}  // namespace

// Refuses a raster above the limit from its header alone; a JPEG whose frame header cannot be found
// is refused too (libjpeg would scan further than a header check that gave up). OpenCV's own
// check (OPENCV_IO_MAX_IMAGE_PIXELS) is read when OpenCV loads, before main: the setenv below only
// reaches it in child processes, so it is not the limit here.
void check_image_size(const std::string& bytes, const std::string& name) {
  static const bool opencv_limit_set = [] {
    ::setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(g_max_image_pixels.load()).c_str(), 0);
    return true;
  }();
  (void)opencv_limit_set;
  int64_t width = 0, height = 0;
  if (!image_header_size(bytes, width, height)) {
    DETSEG_CHECK(image_format(bytes) != ImageFormat::kJpeg, name,
                 ": corrupt JPEG (no frame header before the image data: its size cannot be read)");
    return;
  }
  const int64_t limit = g_max_image_pixels.load();
  // Headers claim up to 2^32 (PNG) or 2^40 (PNM) a side: width * height can pass int64, so the
  // check divides and the message multiplies in double.
  if (width <= limit && height <= limit && (width == 0 || height <= limit / width)) return;
  const double pixels = static_cast<double>(width) * static_cast<double>(height);
  throw Error(str(name, ": image is ", width, "x", height, " = ",
                  pixels < 9e18 ? str(static_cast<int64_t>(pixels)) : str(pixels), " pixels, above the limit of ",
                  limit, " (max_image_pixels in the config; a header claiming this is also how decompression bombs look)"));
}

ImageFormat image_format(const std::string& b) {
  if (is_jpeg(b)) return ImageFormat::kJpeg;
  if (is_png(b)) return ImageFormat::kPng;
  if (b.compare(0, 2, "BM") == 0) return ImageFormat::kBmp;
  // As OpenCV's PNM decoder claims a file (whitespace after "P1".."P6"): "P1" + anything else went
  // on to the decoders after it, DICOM's among them.
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6' && std::isspace(static_cast<unsigned char>(b[2])))
    return ImageFormat::kPnm;
  return ImageFormat::kOther;
}

void check_encoded_image(const std::string& bytes, const std::string& name) {
  DETSEG_CHECK(!bytes.empty(), name, ": image file is empty");
  DETSEG_CHECK(image_format(bytes) != ImageFormat::kOther, name, ": cannot decode image (not a JPEG, PNG, BMP or PNM file)");
  check_image_size(bytes, name);
  if (is_jpeg(bytes)) DETSEG_CHECK(jpeg_has_end_marker(bytes), name, ": corrupt JPEG (truncated: no end-of-image marker)");
}

void set_max_image_pixels(int64_t pixels) {
  DETSEG_CHECK(pixels > 0, "max_image_pixels must be positive, got ", pixels);
  g_max_image_pixels = pixels;
}

int64_t max_image_pixels() { return g_max_image_pixels.load(); }

LabelImage decode_label_png(const std::string& bytes, const std::string& path) {
  DETSEG_CHECK(image_format(bytes) != ImageFormat::kOther, path, ": cannot decode label map (not a PNG)");
  check_image_size(bytes, path);
  if (is_png(bytes)) {
    PngSamples png;
    DETSEG_CHECK(read_png_samples(bytes, png), path, ": cannot decode label map (", png.error[0] ? png.error : "not a PNG",
                 ")");
    DETSEG_CHECK(!png.pixels.empty() || png.width * png.height == 0, path,
                 ": label map must be a single-channel 8-bit PNG of class ids (or a palette PNG, as VOC's "
                 "SegmentationClass), got PNG colour type ", png.color_type, " at ", png.bit_depth, " bits");
    LabelImage out;
    out.height = png.height;
    out.width = png.width;
    out.pixels = std::move(png.pixels);
    return out;
  }
  cv::Mat m;
  try {
    m = cv::imdecode(wrap_bytes(bytes), cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw Error(str(path, ": cannot decode label map (", e.err, ")"));
  }
  DETSEG_CHECK(!m.empty(), path, ": cannot decode label map (not a PNG, or corrupt data)");
  DETSEG_CHECK(m.type() == CV_8UC1, path, ": label map must be a single-channel 8-bit PNG of class ids, got ",
               m.channels(), " channel(s) of ", m.elemSize1() * 8, "-bit");
  LabelImage out;
  out.height = m.rows;
  out.width = m.cols;
  out.pixels.resize(static_cast<size_t>(out.height * out.width));
  cv::Mat dst(m.rows, m.cols, CV_8UC1, out.pixels.data());
  m.copyTo(dst);
  return out;
}

LabelValues::LabelValues(int64_t num_classes, const std::vector<int>& void_values) : num_classes_(num_classes) {
  for (int v = 0; v < 256; ++v) {
    lut_[v] = static_cast<uint8_t>(v);
    valid_[v] = num_classes <= 0 || v < num_classes || v == kIgnoreLabel;
  }
  for (int v : void_values) {
    DETSEG_CHECK(v >= 0 && v <= 255, "segmentation void value must be in 0..255, got ", v);
    lut_[v] = kIgnoreLabel;
    valid_[v] = true;
  }
}

void LabelValues::apply(LabelImage& label, const std::string& name) const {
  apply(label.pixels.data(), label.height, label.width, name);
}

void LabelValues::apply(uint8_t* p, int64_t height, int64_t width, const std::string& name) const {
  for (int64_t i = 0, n = height * width; i < n; ++i) {
    DETSEG_CHECK(valid_[p[i]], name, ": pixel value ", static_cast<int>(p[i]), " at (x=", i % width, ", y=", i / width,
                 ") is not a class id < ", num_classes_, " nor void/ignore");
    p[i] = lut_[p[i]];
  }
}

}  // namespace detseg

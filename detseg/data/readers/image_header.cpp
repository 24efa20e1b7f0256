// Implements: image width and height from the file header (JPEG frame header, PNG IHDR, BMP, PNM)
// without decoding, so readers can size annotations and the decoder can refuse huge rasters.
#include "detseg/data/readers/image_header.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace detseg {
namespace {

uint32_t big_endian(const std::string& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

uint32_t little_endian(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

// The frame header (SOF0..SOF15, not DHT/JPG/DAC) holds the size; skip marker segments to reach it.
// Between segments, bytes that are not a marker are skipped as libjpeg's next_marker() skips them
// (with a warning only): stopping there let a file whose header this scan gave up on reach the
// decoder, which then found a 29778x20051 frame header further on (fuzz/regressions/image).
// SOI, EOI and SOS before a frame header end the scan: libjpeg refuses those files.
bool jpeg_size(const std::string& b, int64_t& width, int64_t& height) {
  size_t i = 2;
  for (;;) {
    while (i < b.size() && static_cast<unsigned char>(b[i]) != 0xFF) ++i;  // garbage
    while (i < b.size() && static_cast<unsigned char>(b[i]) == 0xFF) ++i;  // fill bytes
    if (i >= b.size()) return false;
    const unsigned marker = static_cast<unsigned char>(b[i]);
    ++i;  // i is now just past the marker
    if (marker == 0x00) continue;  // a stuffed FF 00: data, not a marker
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // stand-alone markers
    if (marker == 0xD8 || marker == 0xD9 || marker == 0xDA) return false;
    if (i + 2 > b.size()) return false;
    const uint32_t length = big_endian(b, i, 2);
    if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      if (i + 7 > b.size()) return false;
      height = big_endian(b, i + 3, 2);
      width = big_endian(b, i + 5, 2);
      return true;
    }
    if (length < 2) return false;
    i += length;
  }
}

bool pnm_size(const std::string& b, int64_t& width, int64_t& height) {
  // "P6 <w> <h> ..." read the way OpenCV's PNM decoder reads it (grfmt_pxm.cpp, ReadNumber), so the
  // size checked is the size decoded: whitespace and comments ('#' to the end of the line) before
  // a number, and the one character after a number is its delimiter, whatever it is ("4#9" is 4
  // then 9: the fuzzer found a header read as 4x1 that decoded as 4x9).
  size_t i = 2;
  int64_t values[2];
  for (int64_t& v : values) {
    while (i < b.size() && !std::isdigit(static_cast<unsigned char>(b[i]))) {
      if (b[i] == '#') {
        while (i < b.size() && b[i] != '\n' && b[i] != '\r') ++i;
        ++i;
      } else if (std::isspace(static_cast<unsigned char>(b[i]))) {
        ++i;
      } else {
        return false;
      }
    }
    if (i >= b.size()) return false;
    v = 0;
    for (; i < b.size() && std::isdigit(static_cast<unsigned char>(b[i])); ++i)
      v = std::min<int64_t>(v * 10 + (b[i] - '0'), int64_t(1) << 40);  // far past any limit, no overflow
    ++i;  // the delimiter
  }
  width = values[0];
  height = values[1];
  return true;
}

// The Orientation entry of a TIFF header's first IFD (EXIF's layout), either byte order. Every read
// is bounds-checked against `n`: the bytes come from the file.
int tiff_orientation(const unsigned char* p, size_t n) {
  if (n < 8) return 1;
  bool little;
  if (p[0] == 'I' && p[1] == 'I' && p[2] == 0x2A && p[3] == 0) little = true;
  else if (p[0] == 'M' && p[1] == 'M' && p[2] == 0 && p[3] == 0x2A) little = false;
  else return 1;
  auto read = [&](size_t at, int bytes) {
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      const uint32_t byte = p[at + static_cast<size_t>(little ? bytes - 1 - i : i)];
      v = (v << 8) | byte;
    }
    return v;
  };
  const uint32_t ifd = read(4, 4);
  if (ifd > n - 2) return 1;
  const uint32_t entries = read(ifd, 2);
  size_t at = static_cast<size_t>(ifd) + 2;
  for (uint32_t k = 0; k < entries && at + 12 <= n; ++k, at += 12) {
    if (read(at, 2) != 0x0112) continue;
    const uint32_t type = read(at + 2, 2), count = read(at + 4, 4);
    if (count < 1) return 1;
    const uint32_t value = type == 3 ? read(at + 8, 2) : type == 4 ? read(at + 8, 4) : 0;  // SHORT, LONG
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

int jpeg_orientation(const std::string& b) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  size_t i = 2;
  for (;;) {  // the segments before the scan, walked as jpeg_size walks them
    while (i < b.size() && p[i] != 0xFF) ++i;
    while (i < b.size() && p[i] == 0xFF) ++i;
    if (i >= b.size()) return 1;
    const unsigned marker = p[i++];
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;
    if (marker == 0xD8 || marker == 0xD9 || marker == 0xDA) return 1;
    if (i + 2 > b.size()) return 1;
    const size_t length = big_endian(b, i, 2);
    if (length < 2) return 1;
    const size_t start = i + 2, end = std::min(b.size(), i + length);
    // The first APP1 holding EXIF decides (PIL and OpenCV take the first one too).
    if (marker == 0xE1 && end >= start + 6 && b.compare(start, 6, std::string("Exif\0\0", 6)) == 0)
      return tiff_orientation(p + start + 6, end - start - 6);
    i += length;
  }
}

int png_orientation(const std::string& b) {
  const auto* p = reinterpret_cast<const unsigned char*>(b.data());
  for (size_t i = 8; i + 8 <= b.size();) {  // chunks: length, type, data, CRC
    const uint64_t length = big_endian(b, i, 4);
    const std::string type = b.substr(i + 4, 4);
    if (type == "IDAT" || type == "IEND") return 1;
    const size_t start = i + 8;
    if (type == "eXIf") return tiff_orientation(p + start, static_cast<size_t>(std::min<uint64_t>(length, b.size() - start)));
    if (length > b.size() - start) return 1;
    i = start + static_cast<size_t>(length) + 4;
  }
  return 1;
}

}  // namespace

int exif_orientation(const std::string& b) {
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xFF && static_cast<unsigned char>(b[1]) == 0xD8)
    return jpeg_orientation(b);
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return png_orientation(b);
  return 1;
}

bool image_header_size(const std::string& b, int64_t& width, int64_t& height) {
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xFF && static_cast<unsigned char>(b[1]) == 0xD8)
    return jpeg_size(b, width, height);
  if (b.size() >= 24 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) {
    width = big_endian(b, 16, 4);
    height = big_endian(b, 20, 4);
    return true;
  }
  if (b.size() >= 26 && b[0] == 'B' && b[1] == 'M') {
    width = static_cast<int32_t>(little_endian(b, 18));
    height = static_cast<int32_t>(little_endian(b, 22));
    width = width < 0 ? -width : width;
    height = height < 0 ? -height : height;  // negative: rows stored top-down
    return true;
  }
  if (b.size() >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return pnm_size(b, width, height);
  return false;
}

}  // namespace detseg

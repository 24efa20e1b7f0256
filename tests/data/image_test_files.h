// Implements: small encoded images for the decode tests (torch-free, also built under the
// sanitizers): a test pattern, JPEG/PNG bytes through OpenCV, an EXIF orientation spliced into a
// JPEG (an APP1 segment) or a PNG (an eXIf chunk) by hand-built bytes, and damaged JPEGs.
#pragma once

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace detseg::datatest {

// A w x h BGR picture that no flip or turn maps onto itself: smooth ramps (they survive JPEG)
// plus a bright block near the top-left corner.
inline cv::Mat test_pattern(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const bool block = x < w / 4 && y < h / 3;
      m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(block ? 250 : 20 + 200 * x / w),
                                        static_cast<uchar>(block ? 250 : 30 + 180 * y / h),
                                        static_cast<uchar>(block ? 250 : 90));
    }
  return m;
}

inline std::string encoded(const std::string& ext, const cv::Mat& m, const std::vector<int>& params = {}) {
  std::vector<uchar> buffer;
  if (!cv::imencode(ext, m, buffer, params)) return "";
  return std::string(buffer.begin(), buffer.end());
}

inline std::string jpeg_bytes(const cv::Mat& m, int quality = 95) {
  return encoded(".jpg", m, {cv::IMWRITE_JPEG_QUALITY, quality});
}

// A TIFF header with one IFD entry, Orientation (0x0112, SHORT, 1 value), in either byte order.
inline std::string exif_tiff(int orientation, bool big_endian) {
  auto u16 = [&](unsigned v) {
    return big_endian ? std::string{static_cast<char>(v >> 8), static_cast<char>(v & 0xFF)}
                      : std::string{static_cast<char>(v & 0xFF), static_cast<char>(v >> 8)};
  };
  auto u32 = [&](unsigned v) { return big_endian ? u16(v >> 16) + u16(v & 0xFFFF) : u16(v & 0xFFFF) + u16(v >> 16); };
  std::string tiff = big_endian ? std::string("MM\0*", 4) : std::string("II*\0", 4);
  tiff += u32(8);                                                // IFD0 right after the header
  tiff += u16(1);                                                // one entry
  tiff += u16(0x0112) + u16(3) + u32(1) + u16(static_cast<unsigned>(orientation)) + u16(0);
  tiff += u32(0);                                                // no next IFD
  return tiff;
}

// `jpeg` with an APP1 "Exif" segment holding `orientation` inserted right after its SOI marker.
inline std::string jpeg_with_exif(const std::string& jpeg, int orientation, bool big_endian = false) {
  const std::string payload = std::string("Exif\0\0", 6) + exif_tiff(orientation, big_endian);
  const size_t length = payload.size() + 2;
  const std::string app1 = std::string("\xFF\xE1", 2) + static_cast<char>(length >> 8) + static_cast<char>(length & 0xFF) +
                           payload;
  return jpeg.substr(0, 2) + app1 + jpeg.substr(2);
}

inline uint32_t crc32_of(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// `png` with an eXIf chunk holding `orientation` right after its IHDR chunk (CRC included).
inline std::string png_with_exif(const std::string& png, int orientation) {
  const std::string data = exif_tiff(orientation, /*big_endian=*/true);
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>((v >> 16) & 0xFF), static_cast<char>((v >> 8) & 0xFF),
                       static_cast<char>(v & 0xFF)};
  };
  const std::string chunk = be32(static_cast<uint32_t>(data.size())) + "eXIf" + data + be32(crc32_of("eXIf" + data));
  const size_t after_ihdr = 8 + 8 + 13 + 4;
  return png.substr(0, after_ihdr) + chunk + png.substr(after_ihdr);
}

// The JPEG without its end-of-image marker (FF D9, its last two bytes as OpenCV writes it).
inline std::string without_end_marker(const std::string& jpeg) { return jpeg.substr(0, jpeg.size() - 2); }

}  // namespace detseg::datatest

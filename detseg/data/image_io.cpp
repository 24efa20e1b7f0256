// Implements: image decoding via OpenCV into [3, H, W] uint8 RGB tensors.
#include "detseg/data/image_io.h"

#include <opencv2/imgcodecs.hpp>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

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

cv::Mat wrap_bytes(const std::string& bytes) {
  return cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                 const_cast<char*>(bytes.data()));  // imdecode only reads
}

}  // namespace

at::Tensor decode_image(const std::string& bytes, const std::string& name) {
  DETSEG_CHECK(!bytes.empty(), name, ": image file is empty");
  if (is_jpeg(bytes)) DETSEG_CHECK(jpeg_has_end_marker(bytes), name, ": corrupt JPEG (truncated: no end-of-image marker)");
  cv::Mat bgr;
  try {
    bgr = cv::imdecode(wrap_bytes(bytes), cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    throw Error(str(name, ": cannot decode image: ", e.what()));
  }
  DETSEG_CHECK(!bgr.empty() && bgr.type() == CV_8UC3, name,
               ": cannot decode image (not a JPEG/PNG, or corrupt data)");
  const int64_t h = bgr.rows, w = bgr.cols;
  at::Tensor out = at::empty({3, h, w}, at::kByte);  // [3, H, W] RGB
  uint8_t* base = out.data_ptr<uint8_t>();
  // cv::split writes channel c into planes[c]; BGR order, so B -> plane 2, R -> plane 0.
  cv::Mat planes[3] = {cv::Mat(h, w, CV_8UC1, base + 2 * h * w), cv::Mat(h, w, CV_8UC1, base + h * w),
                       cv::Mat(h, w, CV_8UC1, base)};
  cv::split(bgr, planes);
  return out;
}

at::Tensor read_image(const std::string& path) { return decode_image(read_file(path), path); }

at::Tensor read_label_png(const std::string& path) {
  const std::string bytes = read_file(path);
  cv::Mat m;
  try {
    m = cv::imdecode(wrap_bytes(bytes), cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    throw Error(str(path, ": cannot decode label map: ", e.what()));
  }
  DETSEG_CHECK(!m.empty(), path, ": cannot decode label map (not a PNG, or corrupt data)");
  DETSEG_CHECK(m.type() == CV_8UC1, path, ": label map must be a single-channel 8-bit PNG of class ids, got ",
               m.channels(), " channel(s) of ", m.elemSize1() * 8, "-bit");
  at::Tensor out = at::empty({m.rows, m.cols}, at::kByte);  // [H, W]
  cv::Mat dst(m.rows, m.cols, CV_8UC1, out.data_ptr<uint8_t>());
  m.copyTo(dst);
  return out;
}

void write_image(const std::string& path, const at::Tensor& image) {
  at::Tensor img = image.to(at::kCPU).contiguous();
  DETSEG_CHECK(img.scalar_type() == at::kByte && (img.dim() == 2 || (img.dim() == 3 && img.size(0) == 3)),
               "write_image: expected [3, H, W] or [H, W] uint8, got ", img.sizes(), " ", img.scalar_type());
  cv::Mat m;
  if (img.dim() == 2) {
    m = cv::Mat(img.size(0), img.size(1), CV_8UC1, img.data_ptr<uint8_t>());
  } else {
    const int64_t h = img.size(1), w = img.size(2);
    uint8_t* base = img.data_ptr<uint8_t>();
    cv::Mat planes[3] = {cv::Mat(h, w, CV_8UC1, base + 2 * h * w), cv::Mat(h, w, CV_8UC1, base + h * w),
                         cv::Mat(h, w, CV_8UC1, base)};
    cv::merge(planes, 3, m);
  }
  const auto dot = path.rfind('.');
  const std::string ext = dot == std::string::npos ? ".png" : path.substr(dot);
  std::vector<uchar> buffer;
  DETSEG_CHECK(cv::imencode(ext, m, buffer), path, ": cannot encode image as ", ext);
  write_file_atomic(path, std::string(buffer.begin(), buffer.end()));
}

}  // namespace detseg

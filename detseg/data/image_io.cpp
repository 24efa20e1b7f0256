// Implements: image decoding via OpenCV into [3, H, W] uint8 RGB tensors.
#include "detseg/data/image_io.h"

#include <opencv2/imgcodecs.hpp>

#include <cstring>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/image_codec.h"

namespace detseg {
namespace {

cv::Mat wrap_bytes(const std::string& bytes) {
  return cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1,
                 const_cast<char*>(bytes.data()));  // imdecode only reads
}

}  // namespace

at::Tensor decode_image(const std::string& bytes, const std::string& name) {
  check_encoded_image(bytes, name);
  cv::Mat bgr;
  try {
    bgr = cv::imdecode(wrap_bytes(bytes), cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    throw Error(str(name, ": cannot decode image (", e.err, ")"));
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
  const LabelImage label = decode_label_png(read_file(path), path);
  at::Tensor out = at::empty({label.height, label.width}, at::kByte);  // [H, W]
  if (!label.pixels.empty()) std::memcpy(out.data_ptr<uint8_t>(), label.pixels.data(), label.pixels.size());
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

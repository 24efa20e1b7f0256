// Implements: image_codec.h's decoded images as [3, H, W] uint8 RGB tensors; label maps; writing images.
#include "detseg/data/image_io.h"

#include <opencv2/imgcodecs.hpp>

#include <cstring>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/log.h"
#include "detseg/data/image_codec.h"

namespace detseg {

at::Tensor rgb_tensor_from_bgr(const cv::Mat& bgr) {
  DETSEG_CHECK(!bgr.empty() && bgr.type() == CV_8UC3, "rgb_tensor_from_bgr: expected an 8-bit BGR image");
  const int64_t h = bgr.rows, w = bgr.cols;
  at::Tensor out = at::empty({3, h, w}, at::kByte);  // [3, H, W] RGB
  uint8_t* base = out.data_ptr<uint8_t>();
  // cv::split writes channel c into planes[c]; BGR order, so B -> plane 2, R -> plane 0.
  cv::Mat planes[3] = {cv::Mat(h, w, CV_8UC1, base + 2 * h * w), cv::Mat(h, w, CV_8UC1, base + h * w),
                       cv::Mat(h, w, CV_8UC1, base)};
  cv::split(bgr, planes);
  return out;
}

at::Tensor decode_image(const std::string& bytes, const std::string& name, int* orientation) {
  return rgb_tensor_from_bgr(decode_image_bgr(bytes, name, orientation));
}

at::Tensor read_image(const std::string& path, int* orientation) {
  return decode_image(read_file(path), path, orientation);
}

at::Tensor read_label_png(const std::string& path) {
  const LabelImage label = decode_label_png(read_file(path), path);
  if (!label.warning.empty()) log_warn_once(path, label.warning);
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

// Harness: encoded image bytes through the checks decode_image makes before decoding
// (check_encoded_image: format, header size against max_image_pixels, JPEG end marker; the
// header parsers are detseg's own) and then OpenCV's decoding exactly as decode_image calls it.
// The tensor copy after that is not here (it needs LibTorch and reads nothing from the file).
#include <opencv2/imgcodecs.hpp>

#include "detseg/data/image_codec.h"
#include "fuzz_common.h"

using namespace detseg;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean([&] {
    check_encoded_image(bytes, "image");
    cv::Mat bgr;
    try {
      const cv::Mat encoded(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
      bgr = cv::imdecode(encoded, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
    } catch (const cv::Exception&) {
      return;  // decode_image turns this into an Error
    }
    if (bgr.empty()) return;
    int64_t width = 0, height = 0;
    // A decoded raster larger than its header said would have slipped past the size limit.
    if (image_header_size(bytes, width, height) && (bgr.cols > width || bgr.rows > height))
      fuzz::finding(str("decoded ", bgr.cols, "x", bgr.rows, " but the header said ", width, "x", height));
  });
  return 0;
}

// Harness: encoded image bytes through decode_image_file, the one decode path of every image detseg
// reads (check_encoded_image: format and header size against max_image_pixels; libjpeg and libpng
// with our own handlers, OpenCV for BMP/PNM; the EXIF orientation parser and the turn). The tensor
// copy after that is not here (it needs LibTorch and reads nothing from the file).
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
    const DecodedImage d = decode_image_file(bytes, "image");
    if (!d.error.empty()) {
      if (!d.bgr.empty()) fuzz::finding("an error and pixels both: " + d.error);
      return;  // decode_image_bgr turns this into an Error
    }
    if (d.bgr.empty() || d.bgr.type() != CV_8UC3) fuzz::finding("no error, yet no 8-bit BGR image");
    const int k = exif_orientation(bytes);
    if (k < 1 || k > 8 || k != d.orientation) fuzz::finding(str("orientation ", k, " against ", d.orientation));
    const bool swapped = d.orientation >= 5;
    if ((swapped ? d.bgr.rows : d.bgr.cols) != d.stored_width || (swapped ? d.bgr.cols : d.bgr.rows) != d.stored_height)
      fuzz::finding(str("turned ", d.bgr.cols, "x", d.bgr.rows, " from ", d.stored_width, "x", d.stored_height));
    int64_t width = 0, height = 0;
    // A decoded raster larger than its header said would have slipped past the size limit.
    if (image_header_size(bytes, width, height) && (d.stored_width > width || d.stored_height > height))
      fuzz::finding(str("decoded ", d.stored_width, "x", d.stored_height, " but the header said ", width, "x", height));
  });
  return 0;
}

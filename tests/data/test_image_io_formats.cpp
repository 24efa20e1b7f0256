// Implements: a regression test for read_image on bytes of a format detseg does not read, found by the
// label-PNG fuzzer (fuzz/fuzz_seg_png.cpp): a clean Error, not an abort inside OpenCV.
#include <gtest/gtest.h>

#include "data_test_util.h"
#include "detseg/core/files.h"
#include "detseg/data/image_io.h"

using namespace detseg;
using detseg::datatest::error_of;

// "DICM" at offset 128 made cv::imdecode hand the file to the DICOM decoder of Debian's OpenCV,
// whose GDCM asserts on a malformed file and takes the process down. Reproducer:
// fuzz/regressions/seg_png/dicom_gdcm_assert (the same bytes after two option bytes).
TEST(ImageIoFormats, BytesOpenCvWouldReadAsDicomAreAnError) {
  const std::string dir = datatest::temp_dir("image_formats");
  const std::string dicom = std::string(128, '?') + "DICM" + std::string("\x02\x00\x00\x00\x26\x00\x00\x00\x00\x44", 10) +
                            std::string(40, '\0');
  write_file_atomic(dir + "/scan.jpg", dicom);
  std::string msg = error_of([&] { read_image(dir + "/scan.jpg"); });
  EXPECT_NE(msg.find("scan.jpg: cannot decode image (not a JPEG, PNG, BMP or PNM file)"), std::string::npos) << msg;
  write_file_atomic(dir + "/scan.png", dicom);
  msg = error_of([&] { read_label_png(dir + "/scan.png"); });
  EXPECT_NE(msg.find("scan.png: cannot decode label map (not a PNG)"), std::string::npos) << msg;
}

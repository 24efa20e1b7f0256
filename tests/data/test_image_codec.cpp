// Implements: tests of the torch-free label-PNG decoder and label-value check (data/image_codec.h)
// on CamVid and on tiny bad files; also built without LibTorch under the sanitizers (fuzz/).
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include "data_test_files.h"
#include "detseg/core/files.h"
#include "detseg/data/image_codec.h"

using namespace detseg;
using detseg::datatest::error_of;

namespace {
std::string png_bytes(const cv::Mat& m) {
  std::vector<uchar> buffer;
  EXPECT_TRUE(cv::imencode(".png", m, buffer));
  return std::string(buffer.begin(), buffer.end());
}
}  // namespace

TEST(ImageCodec, DecodesCamVidAndRejectsWhatIsNoLabelMap) {
  const std::string path = datatest::shared_data("camvid/CamVid/valannot/0016E5_07959.png");
  LabelImage label = decode_label_png(read_file(path), path);
  EXPECT_EQ(label.height, 360);
  EXPECT_EQ(label.width, 480);
  ASSERT_EQ(label.pixels.size(), 360u * 480u);
  EXPECT_LE(*std::max_element(label.pixels.begin(), label.pixels.end()), 11);

  std::string msg = error_of([&] { decode_label_png(png_bytes(cv::Mat::zeros(2, 2, CV_8UC3)), "rgb.png"); });
  EXPECT_NE(msg.find("rgb.png: label map must be a single-channel 8-bit PNG"), std::string::npos) << msg;
  msg = error_of([&] { decode_label_png(png_bytes(cv::Mat::zeros(2, 2, CV_16UC1)), "deep.png"); });
  EXPECT_NE(msg.find("deep.png: label map must be a single-channel 8-bit PNG of class ids (or a palette PNG, as VOC's "
                     "SegmentationClass), got PNG colour type 0 at 16 bits"),
            std::string::npos) << msg;
  for (const std::string& bad : {std::string(), std::string("\x89PNG\r\n\x1a\n", 8), std::string("not an image")}) {
    msg = error_of([&] { decode_label_png(bad, "bad.png"); });
    EXPECT_NE(msg.find("bad.png: cannot decode label map"), std::string::npos) << msg;
  }
}

TEST(ImageCodec, ValuesMapVoidToIgnoreAndNameTheFirstBadPixel) {
  LabelImage label{2, 3, {0, 1, 11, 255, 2, 3}};
  LabelValues(4, {11}).apply(label, "x.png");
  EXPECT_EQ(label.pixels, (std::vector<uint8_t>{0, 1, 255, 255, 2, 3}));
  LabelImage bad{2, 3, {0, 1, 2, 3, 4, 0}};
  const std::string msg = error_of([&] { LabelValues(4, {}).apply(bad, "y.png"); });
  EXPECT_NE(msg.find("y.png: pixel value 4 at (x=1, y=1) is not a class id < 4 nor void/ignore"), std::string::npos) << msg;
  LabelImage any{1, 2, {200, 7}};
  LabelValues(0, {}).apply(any, "z.png");  // num_classes 0: any value
  EXPECT_EQ(any.pixels, (std::vector<uint8_t>{200, 7}));
  EXPECT_NE(error_of([] { LabelValues(4, {256}); }).find("void value must be in 0..255, got 256"), std::string::npos);
  EXPECT_NE(error_of([] { LabelValues(4, {-1}); }).find("got -1"), std::string::npos);
}

// Found by fuzz_seg_png: bytes with "DICM" at offset 128 made cv::imdecode pick Debian OpenCV's
// DICOM decoder, whose GDCM asserts (aborts the process) on a malformed file. Only PNG (labels) and
// JPEG/PNG/BMP/PNM (images) reach OpenCV now. Reproducer: fuzz/regressions/seg_png/.
TEST(ImageCodec, OnlyFormatsWithCheckedHeadersReachOpenCv) {
  const std::string dicom = std::string(128, '?') + "DICM" + std::string("\x02\x00\x00\x00\x26\x00\x00\x00\x00\x44", 10) +
                            std::string(40, '\0');
  EXPECT_EQ(image_format(dicom), ImageFormat::kOther);
  const std::string msg = error_of([&] { decode_label_png(dicom, "scan.png"); });
  EXPECT_NE(msg.find("scan.png: cannot decode label map (not a PNG)"), std::string::npos) << msg;
  EXPECT_EQ(image_format(std::string("\xFF\xD8\xFF\xE0", 4)), ImageFormat::kJpeg);
  EXPECT_EQ(image_format(std::string("\x89PNG\r\n\x1a\n", 8)), ImageFormat::kPng);
  EXPECT_EQ(image_format(std::string("\x89PNG", 4)), ImageFormat::kOther);
  EXPECT_EQ(image_format("BM...."), ImageFormat::kBmp);
  EXPECT_EQ(image_format("P6\n1 1\n255\n"), ImageFormat::kPnm);
  EXPECT_EQ(image_format("GIF89a"), ImageFormat::kOther);
  EXPECT_NE(error_of([&] { check_encoded_image(dicom, "scan.jpg"); }).find("scan.jpg: cannot decode image (not a JPEG, PNG, BMP or PNM file)"),
            std::string::npos);
}

// Found by fuzz_seg_png and fuzz_image: a PNG header claiming 4294967295 x 4294967295 made the
// size check compute width * height in int64 (signed overflow, UBSan). Reproducers:
// fuzz/regressions/seg_png/png_size_overflow, fuzz/regressions/image/png_size_overflow.
TEST(ImageCodec, HugeHeaderSizesDoNotOverflow) {
  std::string png("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\xff\xff\xff\xff\xff\xff\xff\xff\x08\x00\0\0\0", 29);
  png += std::string(16, '\0');
  std::string msg = error_of([&] { check_image_size(png, "huge.png"); });
  EXPECT_NE(msg.find("huge.png: image is 4294967295x4294967295 = 1.84467e+19 pixels, above the limit of 178956970"),
            std::string::npos) << msg;
  EXPECT_NE(error_of([&] { decode_label_png(png, "huge.png"); }).find("above the limit"), std::string::npos);
  // Each side within a large limit, the product far past int64.
  set_max_image_pixels(int64_t(1) << 40);
  msg = error_of([&] { check_image_size(png, "huge.png"); });
  set_max_image_pixels(kDefaultMaxImagePixels);
  EXPECT_NE(msg.find("above the limit of 1099511627776"), std::string::npos) << msg;
  const std::string pnm = "P5 99999999999999 99999999999999 255 ";
  EXPECT_NE(error_of([&] { check_image_size(pnm, "huge.pgm"); }).find("huge.pgm: image is "), std::string::npos);
}

// Found by fuzz_image: "P5 4#9\n1 255 ..." was read as 4x1 (the "#9" a comment) but OpenCV
// decodes 4x9 (the character after a number is its delimiter), so the size limit checked another
// size than the one decoded. Reproducer: fuzz/regressions/image/pnm_comment_after_number.
TEST(ImageCodec, PnmHeaderSizeIsTheDecodedSize) {
  int64_t w = 0, h = 0;
  ASSERT_TRUE(image_header_size(std::string("P5 4#9\n1 255 ") + std::string(32, 'x'), w, h));
  EXPECT_EQ(w, 4);
  EXPECT_EQ(h, 9);
  ASSERT_TRUE(image_header_size("P6\n# comment\r12 34\n255\n", w, h));
  EXPECT_EQ(w, 12);
  EXPECT_EQ(h, 34);
  ASSERT_TRUE(image_header_size("P5 123456789012345678901234567890 2 255 ", w, h));
  EXPECT_EQ(w, int64_t(1) << 40);  // saturated, not wrapped, and the next number is the height
  EXPECT_EQ(h, 2);
  EXPECT_FALSE(image_header_size("P5 x 2", w, h));
}

// Found by fuzz_image and fuzz_seg_png after the fix above: "P1" followed by no whitespace passed
// as PNM here, but OpenCV's PNM decoder wants whitespace there, so the bytes went on to the DICOM
// decoder (DICM at offset 128) and GDCM aborted. Reproducers:
// fuzz/regressions/{image,seg_png}/pnm_magic_without_whitespace_then_dicom.
TEST(ImageCodec, PnmIsWhatOpenCvTakesForPnm) {
  const std::string fake = std::string("P1\x89PNG\r", 7) + std::string(121, '\xff') + "DICM\n";
  EXPECT_EQ(image_format(fake), ImageFormat::kOther);
  EXPECT_NE(error_of([&] { check_encoded_image(fake, "x.pbm"); }).find("not a JPEG, PNG, BMP or PNM file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_label_png(fake, "x.png"); }).find("cannot decode label map (not a PNG)"),
            std::string::npos);
  EXPECT_EQ(image_format("P1 4 1\n0 1 0 1\n"), ImageFormat::kPnm);
  EXPECT_EQ(image_format("P5\t4 1 255 "), ImageFormat::kPnm);
}

// Found by fuzz_image: SOI, a DAC segment, then bytes that are no marker; libjpeg skips such bytes
// and found a 29778x20051 frame header further on (1.8 GB decoded) after the header check had
// given up. Reproducer: fuzz/regressions/image/jpeg_garbage_before_a_huge_frame_header.
TEST(ImageCodec, JpegHeaderScanSkipsGarbageAsLibjpegDoes) {
  const std::string sof = std::string("\xff\xc0\x00\x11\x08", 5) + "\x74\x52" "\x4e\x53" + std::string(12, '\x01');
  const std::string bomb = std::string("\xff\xd8\xff\xcc\x00\x02\x00\x01\x00\x00", 10) + sof + "\xff\xd9";
  std::string msg = error_of([&] { check_image_size(bomb, "bomb.jpg"); });
  EXPECT_NE(msg.find("bomb.jpg: image is 20051x29778 = 597078678 pixels, above the limit"), std::string::npos) << msg;
  int64_t w = 0, h = 0;
  // A stuffed FF 00 and fill bytes are not markers either.
  const std::string stuffed = std::string("\xff\xd8\x12\xff\x00\xff\xff", 7) + sof;
  ASSERT_TRUE(image_header_size(stuffed, w, h));
  EXPECT_EQ(w, 20051);
  EXPECT_EQ(h, 29778);
  // No frame header before the scan data: refused, not handed to the decoder.
  const std::string no_sof = std::string("\xff\xd8\xff\xda\x00\x02\xff\xd9", 8);
  msg = error_of([&] { check_image_size(no_sof, "nosof.jpg"); });
  EXPECT_NE(msg.find("nosof.jpg: corrupt JPEG (no frame header"), std::string::npos) << msg;
  // Real files still pass.
  const std::string real = read_file(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images/BloodImage_00000.jpg");
  ASSERT_TRUE(image_header_size(real, w, h));
  EXPECT_EQ(w, 640);
  EXPECT_EQ(h, 480);
  EXPECT_NO_THROW(check_image_size(real, "real.jpg"));
}

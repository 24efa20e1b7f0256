// Implements: tests of the torch-free image decoding (data/image_codec.h): the one decode path's
// pixels against OpenCV's, the EXIF orientation, damaged JPEG/PNG/BMP/PNM files told in our words,
// the label-PNG decoder and label-value check; also built without LibTorch under the sanitizers (fuzz/).
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>

#include <map>

#include "data_test_files.h"
#include "image_test_files.h"
#include "detseg/core/files.h"
#include "detseg/data/image_codec.h"
#include "test_paths.h"

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
  LabelImage label{2, 3, {0, 1, 11, 255, 2, 3}, ""};
  LabelValues(4, {11}).apply(label, "x.png");
  EXPECT_EQ(label.pixels, (std::vector<uint8_t>{0, 1, 255, 255, 2, 3}));
  LabelImage bad{2, 3, {0, 1, 2, 3, 4, 0}, ""};
  const std::string msg = error_of([&] { LabelValues(4, {}).apply(bad, "y.png"); });
  EXPECT_NE(msg.find("y.png: pixel value 4 at (x=1, y=1) is not a class id < 4 nor void/ignore"), std::string::npos) << msg;
  LabelImage any{1, 2, {200, 7}, ""};
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

// ---- the one decode path (decode_image_file): pixels, EXIF orientation, damaged files

namespace {

cv::Mat opencv_decode(const std::string& bytes, int flags = cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION) {
  return cv::imdecode(std::vector<uchar>(bytes.begin(), bytes.end()), flags);
}

bool same_pixels(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// Decodes with stderr captured: libjpeg's and libpng's own text must never reach it.
DecodedImage quiet_decode(const std::string& bytes, const std::string& name) {
  ::testing::internal::CaptureStderr();
  DecodedImage d = decode_image_file(bytes, name);
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed, "") << name;
  return d;
}

}  // namespace

// libjpeg and libpng driven directly give OpenCV's pixels (IMREAD_COLOR, orientation ignored).
TEST(ImageDecode, PixelsAreOpenCvsForEveryFormat) {
  const cv::Mat pattern = datatest::test_pattern(37, 23);
  cv::Mat rgba, gray, deep;  // (core only: the sanitized build links no imgproc)
  std::vector<cv::Mat> planes;
  cv::split(pattern, planes);
  planes.push_back(cv::Mat(pattern.size(), CV_8UC1));
  planes[3].forEach<uchar>([](uchar& p, const int* at) { p = static_cast<uchar>(at[1] * 7); });
  cv::merge(planes, rgba);
  gray = planes[1];
  pattern.convertTo(deep, CV_16UC3, 257.0);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"demo.jpg", read_file(std::string(DETSEG_SOURCE_DIR) + "/assets/demo/images/BloodImage_00000.jpg")},
      {"pattern.jpg", datatest::jpeg_bytes(pattern)},
      {"gray.jpg", datatest::jpeg_bytes(gray)},
      {"progressive.jpg", datatest::encoded(".jpg", pattern, {cv::IMWRITE_JPEG_PROGRESSIVE, 1})},
      {"pattern.png", datatest::encoded(".png", pattern)},
      {"rgba.png", datatest::encoded(".png", rgba)},
      {"gray.png", datatest::encoded(".png", gray)},
      {"deep.png", datatest::encoded(".png", deep)},
      {"pattern.bmp", datatest::encoded(".bmp", pattern)},
      {"pattern.ppm", datatest::encoded(".ppm", pattern)},
  };
  for (const auto& [name, bytes] : files) {
    const DecodedImage d = quiet_decode(bytes, name);
    EXPECT_EQ(d.error, "") << name;
    EXPECT_EQ(d.warning, "") << name;
    EXPECT_EQ(d.orientation, 1) << name;
    EXPECT_TRUE(same_pixels(d.bgr, opencv_decode(bytes))) << name;
    EXPECT_EQ(d.stored_width, d.bgr.cols) << name;
  }
}

// The ecosystem's convention (PIL's exif_transpose, OpenCV's IMREAD_COLOR): the pixels are turned
// upright by the EXIF Orientation tag before anything else sees them.
TEST(ImageDecode, ExifOrientationTurnsJpegsUpright) {
  const std::string plain_bytes = datatest::jpeg_bytes(datatest::test_pattern(40, 24));
  const cv::Mat plain = decode_image_file(plain_bytes, "plain.jpg").bgr;
  ASSERT_EQ(plain.cols, 40);
  for (bool big_endian : {false, true}) {
    for (int k = 1; k <= 8; ++k) {
      const std::string bytes = datatest::jpeg_with_exif(plain_bytes, k, big_endian);
      EXPECT_EQ(exif_orientation(bytes), k);
      const DecodedImage d = quiet_decode(bytes, "turned.jpg");
      ASSERT_EQ(d.error, "") << k;
      EXPECT_EQ(d.warning, "") << k;
      EXPECT_EQ(d.orientation, k);
      EXPECT_EQ(d.stored_width, 40);
      EXPECT_EQ(d.stored_height, 24);
      EXPECT_EQ(d.bgr.cols, k >= 5 ? 24 : 40) << k;
      // OpenCV's own IMREAD_COLOR applies the tag the same way.
      EXPECT_TRUE(same_pixels(d.bgr, opencv_decode(bytes, cv::IMREAD_COLOR))) << k << (big_endian ? " MM" : " II");
    }
  }
  cv::Mat turned;
  cv::rotate(plain, turned, cv::ROTATE_90_CLOCKWISE);
  EXPECT_TRUE(same_pixels(decode_image_file(datatest::jpeg_with_exif(plain_bytes, 6), "6.jpg").bgr, turned));
  cv::rotate(plain, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
  EXPECT_TRUE(same_pixels(decode_image_file(datatest::jpeg_with_exif(plain_bytes, 8), "8.jpg").bgr, turned));
  cv::rotate(plain, turned, cv::ROTATE_180);
  EXPECT_TRUE(same_pixels(decode_image_file(datatest::jpeg_with_exif(plain_bytes, 3), "3.jpg").bgr, turned));
  // The bright block, stored at the top left, is at the top right once a quarter turn clockwise.
  const cv::Mat six = decode_image_file(datatest::jpeg_with_exif(plain_bytes, 6), "6.jpg").bgr;
  EXPECT_GT(six.at<cv::Vec3b>(2, 21)[0], 200);
  EXPECT_LT(six.at<cv::Vec3b>(2, 2)[0], 200);
}

TEST(ImageDecode, ExifOrientationOfPngsAndLabelMaps) {
  const cv::Mat pattern = datatest::test_pattern(9, 5);
  const std::string png = datatest::png_with_exif(datatest::encoded(".png", pattern), 6);
  EXPECT_EQ(exif_orientation(png), 6);
  const DecodedImage d = quiet_decode(png, "turned.png");
  EXPECT_EQ(d.warning, "");  // the chunk's CRC is right, and an eXIf chunk is no problem to libpng
  cv::Mat turned;
  cv::rotate(pattern, turned, cv::ROTATE_90_CLOCKWISE);
  EXPECT_TRUE(same_pixels(d.bgr, turned));
  EXPECT_TRUE(same_pixels(d.bgr, opencv_decode(png, cv::IMREAD_COLOR)));  // OpenCV's IMREAD_COLOR reads eXIf too
  // A label map is turned as its image is.
  cv::Mat ids(2, 3, CV_8UC1);
  for (int i = 0; i < 6; ++i) ids.data[i] = static_cast<uchar>(i);
  const LabelImage label = decode_label_png(datatest::png_with_exif(datatest::encoded(".png", ids), 8), "l.png");
  ASSERT_EQ(label.height, 3);
  ASSERT_EQ(label.width, 2);
  // Stored rows (0 1 2 / 3 4 5) a quarter turn counter-clockwise: (2 5 / 1 4 / 0 3).
  EXPECT_EQ(label.pixels, (std::vector<uint8_t>{2, 5, 1, 4, 0, 3}));
}

TEST(ImageDecode, ExifParserTakesTheFirstExifSegmentAndStaysInBounds) {
  const std::string plain = datatest::jpeg_bytes(datatest::test_pattern(16, 16));
  // An XMP APP1 first is not EXIF; of two EXIF segments the first decides (PIL, OpenCV).
  std::string xmp = "http://ns.adobe.com/xap/1.0/" + std::string(1, '\0') + "<x/>";
  std::string with_xmp = plain.substr(0, 2) + "\xFF\xE1" + static_cast<char>(0) + static_cast<char>(xmp.size() + 2) + xmp +
                         plain.substr(2);
  EXPECT_EQ(exif_orientation(datatest::jpeg_with_exif(with_xmp, 6)), 6);
  EXPECT_EQ(exif_orientation(datatest::jpeg_with_exif(datatest::jpeg_with_exif(plain, 3), 8)), 8);
  EXPECT_EQ(exif_orientation(datatest::jpeg_with_exif(plain, 9)), 1);  // out of range: upright
  EXPECT_EQ(exif_orientation(datatest::jpeg_with_exif(plain, 0)), 1);
  EXPECT_EQ(exif_orientation(plain), 1);
  // Every prefix of a file with the tag reads in bounds (ASan build) and gives the tag or nothing.
  const std::string tagged = datatest::jpeg_with_exif(plain, 5, true);
  for (size_t n = 0; n <= 80; ++n) {
    const int k = exif_orientation(tagged.substr(0, n));
    EXPECT_TRUE(k == 5 || k == 1) << n;
  }
  EXPECT_EQ(exif_orientation(tagged.substr(0, 60)), 5);
  const std::string png = datatest::png_with_exif(datatest::encoded(".png", datatest::test_pattern(3, 3)), 7);
  for (size_t n = 0; n <= 100; ++n) {
    const int k = exif_orientation(png.substr(0, n));
    EXPECT_TRUE(k == 7 || k == 1) << n;
  }
}

// "Decodable means usable": a JPEG without its end marker decodes completely (libjpeg, PIL and
// OpenCV read it), so it is used, with one warning of ours; libjpeg's "Premature end of JPEG
// file" never reaches stderr.
TEST(ImageDecode, JpegWithoutEndMarkerIsUsedWithOneWarningOfOurs) {
  const std::string full = datatest::jpeg_bytes(datatest::test_pattern(64, 48));
  const DecodedImage d = quiet_decode(datatest::without_end_marker(full), "no_eoi.jpg");
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.warning, "no_eoi.jpg: JPEG ends without its end-of-image marker; every row was decoded, and the image is used");
  EXPECT_TRUE(same_pixels(d.bgr, decode_image_file(full, "full.jpg").bgr));
  EXPECT_NO_THROW(check_encoded_image(datatest::without_end_marker(full), "no_eoi.jpg"));
}

// A JPEG whose data stops early: its missing rows are grey. Up to 5% of the rows lost, it is used
// with a warning saying how much; beyond, it is undecodable.
TEST(ImageDecode, TruncatedJpegIsUsedWhenLittleIsLostAndRefusedOtherwise) {
  const cv::Mat pattern = datatest::test_pattern(64, 640);
  const std::string full = datatest::jpeg_bytes(pattern);
  const cv::Mat whole = decode_image_file(full, "whole.jpg").bgr;
  // OpenCV writes 4:2:0, so an iMCU row is 16 pixel rows: 40 of them. Cut ever more bytes off the
  // end and look at the first cut that loses the last row, then the last two (5%), then three.
  std::map<int, DecodedImage> first_at_loss;  // lost iMCU rows -> decode
  for (size_t cut = 3; cut < full.size() / 4 && first_at_loss.size() < 3; ++cut) {
    DecodedImage d = quiet_decode(full.substr(0, full.size() - cut), "cut.jpg");
    const std::string& said = d.error.empty() ? d.warning : d.error;
    const size_t at = said.find("its data stops at row ");
    ASSERT_NE(at, std::string::npos) << cut << ": " << said;
    const int row = std::stoi(said.substr(at + 22));
    first_at_loss.emplace((640 - row) / 16, std::move(d));
  }
  ASSERT_EQ(first_at_loss.size(), 3u);
  const DecodedImage& one = first_at_loss.at(1);
  EXPECT_EQ(one.warning, "cut.jpg: truncated JPEG: its data stops at row 624 of 640; the 16 rows below (2.5%) are filled in "
                         "grey, and the image is used");
  EXPECT_TRUE(same_pixels(one.bgr.rowRange(0, 600), whole.rowRange(0, 600)));
  const DecodedImage& two = first_at_loss.at(2);  // 5.0%: still used
  EXPECT_EQ(two.error, "");
  EXPECT_EQ(two.warning, "cut.jpg: truncated JPEG: its data stops at row 608 of 640; the 32 rows below (5.0%) are filled in "
                         "grey, and the image is used");
  const cv::Mat tail = two.bgr.rowRange(626, 640);
  EXPECT_EQ(cv::norm(tail, cv::Mat(tail.size(), CV_8UC3, cv::Scalar(128, 128, 128)), cv::NORM_INF), 0);  // libjpeg's grey
  const DecodedImage& three = first_at_loss.at(3);
  EXPECT_TRUE(three.bgr.empty());
  EXPECT_EQ(three.error, "cut.jpg: cannot decode image (truncated JPEG: its data stops at row 592 of 640: 7.5% of its rows "
                         "are missing, more than 5%)");
  const DecodedImage half = quiet_decode(full.substr(0, full.size() / 2), "half.jpg");
  EXPECT_TRUE(half.bgr.empty());
  EXPECT_EQ(half.warning, "");
  EXPECT_EQ(half.error.find("half.jpg: cannot decode image (truncated JPEG: its data stops at row "), 0u) << half.error;
  const DecodedImage header_only = quiet_decode(full.substr(0, 200), "head.jpg");
  EXPECT_EQ(header_only.error.find("head.jpg: cannot decode image (truncated JPEG"), 0u) << header_only.error;
}

TEST(ImageDecode, DamagedPngBmpAndPnmAreOneLineOfOurs) {
  const cv::Mat pattern = datatest::test_pattern(20, 12);
  const std::string png = datatest::encoded(".png", pattern);
  // All rows there, the IEND chunk (12 bytes) gone: used, as PIL does.
  DecodedImage d = quiet_decode(png.substr(0, png.size() - 12), "no_iend.png");
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.warning.find("no_iend.png: PNG ends early or is damaged after its image data ("), 0u) << d.warning;
  EXPECT_TRUE(same_pixels(d.bgr, pattern));
  d = quiet_decode(png.substr(0, png.size() / 2), "half.png");
  EXPECT_EQ(d.error, "half.png: cannot decode image (corrupt PNG: the file ends early)");
  const std::string bmp = datatest::encoded(".bmp", pattern);
  d = quiet_decode(bmp.substr(0, bmp.size() / 2), "half.bmp");
  EXPECT_EQ(d.error.find("half.bmp: cannot decode image (corrupt BMP file"), 0u) << d.error;
  const std::string ppm = datatest::encoded(".ppm", pattern);
  d = quiet_decode(ppm.substr(0, ppm.size() / 2), "half.ppm");
  EXPECT_EQ(d.error.find("half.ppm: cannot decode image (corrupt PNM file"), 0u) << d.error;
  d = quiet_decode("not an image", "text.jpg");
  EXPECT_EQ(d.error, "text.jpg: cannot decode image (not a JPEG, PNG, BMP or PNM file)");
}

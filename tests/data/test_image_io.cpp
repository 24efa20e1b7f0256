// Implements: tests of image decoding: JPEG/PNG, grayscale/RGBA to RGB, missing/corrupt/truncated files, label PNGs.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <png.h>

#include <cstdio>
#include <vector>

#include "data_test_util.h"
#include "detseg/core/files.h"
#include "detseg/data/image_io.h"

using namespace detseg;
using detseg::datatest::error_of;

TEST(ImageIo, DecodesBccdJpegAsRgb) {
  at::Tensor img = read_image(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"));
  ASSERT_EQ(img.sizes(), (at::IntArrayRef{3, 480, 640}));
  EXPECT_EQ(img.scalar_type(), at::kByte);
  // Blood smears are pinkish: mean red above mean blue... and below-white overall.
  auto mean = img.to(at::kFloat).mean({1, 2});
  EXPECT_GT(mean[0].item<float>(), mean[1].item<float>());
}

TEST(ImageIo, PngRoundTripKeepsChannelOrder) {
  const std::string dir = datatest::temp_dir("png");
  at::Tensor img = at::zeros({3, 4, 5}, at::kByte);
  img[0].fill_(200);  // pure red
  img[2][1][2] = 7;
  write_image(dir + "/red.png", img);
  at::Tensor back = read_image(dir + "/red.png");
  EXPECT_TRUE(back.equal(img));
}

TEST(ImageIo, GrayscaleAndRgbaBecomeRgb) {
  const std::string dir = datatest::temp_dir("gray");
  cv::Mat gray(3, 4, CV_8UC1, cv::Scalar(77));
  cv::imwrite(dir + "/g.png", gray);
  at::Tensor g = read_image(dir + "/g.png");
  ASSERT_EQ(g.sizes(), (at::IntArrayRef{3, 3, 4}));
  EXPECT_EQ(g.min().item<int>(), 77);
  EXPECT_EQ(g.max().item<int>(), 77);
  cv::Mat rgba(2, 2, CV_8UC4, cv::Scalar(10, 20, 30, 128));  // B, G, R, A
  cv::imwrite(dir + "/a.png", rgba);
  at::Tensor a = read_image(dir + "/a.png");
  ASSERT_EQ(a.sizes(), (at::IntArrayRef{3, 2, 2}));
  EXPECT_EQ(a[0][0][0].item<int>(), 30);  // R
  EXPECT_EQ(a[2][0][0].item<int>(), 10);  // B
}

TEST(ImageIo, Coco128GrayscaleJpegDecodesToThreeEqualChannels) {
  at::Tensor img = read_image(datatest::shared_data("coco128/val2017/000000000086.jpg"));
  ASSERT_EQ(img.sizes(), (at::IntArrayRef{3, 640, 512}));
  EXPECT_TRUE(img[0].equal(img[1]));
  EXPECT_TRUE(img[1].equal(img[2]));
}

TEST(ImageIo, MissingCorruptAndTruncatedFilesNameTheFile) {
  const std::string dir = datatest::temp_dir("corrupt");
  EXPECT_NE(error_of([&] { read_image(dir + "/nope.jpg"); }).find(dir + "/nope.jpg"), std::string::npos);
  write_file_atomic(dir + "/garbage.jpg", "this is not an image at all");
  std::string msg = error_of([&] { read_image(dir + "/garbage.jpg"); });
  EXPECT_NE(msg.find("garbage.jpg"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot decode"), std::string::npos) << msg;
  const std::string jpeg = read_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"));
  write_file_atomic(dir + "/cut.jpg", jpeg.substr(0, jpeg.size() / 2));
  msg = error_of([&] { read_image(dir + "/cut.jpg"); });
  EXPECT_EQ(msg, dir + "/cut.jpg: cannot decode image (truncated JPEG: its data stops at row 224 of 480: 53.3% of its "
                       "rows are missing, more than 5%)");
  write_file_atomic(dir + "/empty.png", "");
  EXPECT_NE(error_of([&] { read_image(dir + "/empty.png"); }).find("empty"), std::string::npos);
}

TEST(ImageIo, LabelPngMustBeSingleChannel) {
  at::Tensor label = read_label_png(datatest::shared_data("camvid/CamVid/valannot/0016E5_07959.png"));
  ASSERT_EQ(label.sizes(), (at::IntArrayRef{360, 480}));
  EXPECT_LE(label.max().item<int>(), 11);
  const std::string dir = datatest::temp_dir("labelpng");
  write_image(dir + "/rgb.png", at::zeros({3, 2, 2}, at::kByte));
  std::string msg = error_of([&] { read_label_png(dir + "/rgb.png"); });
  EXPECT_NE(msg.find("rgb.png: label map must be a single-channel"), std::string::npos) << msg;
}

namespace {
// A PNG signature and IHDR chunk claiming `width` x `height`, then nothing decodable.
std::string png_header(uint32_t width, uint32_t height) {
  std::string b = "\x89PNG\r\n\x1a\n";
  b += std::string("\0\0\0\x0dIHDR", 8);
  for (uint32_t v : {width, height})
    for (int shift = 24; shift >= 0; shift -= 8) b += static_cast<char>((v >> shift) & 0xFF);
  b += std::string("\x08\x02\0\0\0", 5);
  return b + std::string(64, '\0');
}
}  // namespace

TEST(ImageIo, HeaderSizeOfJpegPngBmpPnm) {
  int64_t w = 0, h = 0;
  const std::string jpeg = read_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"));
  ASSERT_TRUE(image_header_size(jpeg, w, h));
  EXPECT_EQ(w, 640);
  EXPECT_EQ(h, 480);
  ASSERT_TRUE(image_header_size(png_header(70000, 3), w, h));
  EXPECT_EQ(w, 70000);
  EXPECT_EQ(h, 3);
  ASSERT_TRUE(image_header_size("P6\n# comment\n12 34\n255\n", w, h));
  EXPECT_EQ(w, 12);
  EXPECT_EQ(h, 34);
  std::string bmp(54, '\0');
  bmp[0] = 'B';
  bmp[1] = 'M';
  bmp[18] = 5;                                                      // width 5
  bmp[22] = static_cast<char>(0xFD), bmp[23] = bmp[24] = bmp[25] = static_cast<char>(0xFF);  // height -3: top-down
  ASSERT_TRUE(image_header_size(bmp, w, h));
  EXPECT_EQ(w, 5);
  EXPECT_EQ(h, 3);
  EXPECT_FALSE(image_header_size("GIF89a....", w, h));
}

TEST(ImageIo, HugeClaimedSizeIsRefusedBeforeDecoding) {
  const std::string dir = datatest::temp_dir("image_bomb");
  write_file_atomic(dir + "/bomb.png", png_header(100000, 100000));
  EXPECT_EQ(error_of([&] { read_image(dir + "/bomb.png"); }),
            dir + "/bomb.png: image is 100000x100000 = 10000000000 pixels, above the limit of 178956970 "
                  "(max_image_pixels in the config; a header claiming this is also how decompression bombs look)");
  EXPECT_NE(error_of([&] { read_label_png(dir + "/bomb.png"); }).find("above the limit"), std::string::npos);
  // A JPEG frame header claiming 65535 x 65535 (4.3 G pixels) in a 1 kB file.
  std::string jpeg = read_file(datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg"));
  int64_t w = 0, h = 0;
  ASSERT_TRUE(image_header_size(jpeg, w, h));
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  jpeg.replace(sof + 5, 4, "\xff\xff\xff\xff");
  write_file_atomic(dir + "/bomb.jpg", jpeg);
  EXPECT_NE(error_of([&] { read_image(dir + "/bomb.jpg"); }).find("image is 65535x65535 = 4294836225 pixels"),
            std::string::npos);
  // The limit is a setting: a real 640x480 image passes the default and fails a tiny limit.
  const std::string real = datatest::shared_data("bccd/BCCD/JPEGImages/BloodImage_00000.jpg");
  EXPECT_EQ(read_image(real).size(2), 640);
  set_max_image_pixels(1000);
  const std::string msg = error_of([&] { read_image(real); });
  set_max_image_pixels(kDefaultMaxImagePixels);
  EXPECT_NE(msg.find("image is 640x480 = 307200 pixels, above the limit of 1000"), std::string::npos) << msg;
}

namespace {
// Writes a palette PNG (VOC SegmentationClass style: indices, colours only for display) with libpng.
void write_palette_png(const std::string& path, const std::vector<std::vector<uint8_t>>& indices) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  const auto h = static_cast<uint32_t>(indices.size()), w = static_cast<uint32_t>(indices[0].size());
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  // VOC's colours for background, aeroplane, bicycle; 255 (void) is (224, 224, 192).
  std::vector<png_color> palette(256, png_color{0, 0, 0});
  palette[1] = {128, 0, 0};
  palette[2] = {0, 128, 0};
  palette[255] = {224, 224, 192};
  png_set_PLTE(png, info, palette.data(), 256);
  png_write_info(png, info);
  for (const auto& row : indices) png_write_row(png, const_cast<png_bytep>(row.data()));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}
}  // namespace

TEST(ImageIo, PaletteLabelPngGivesItsIndices) {
  const std::string dir = datatest::temp_dir("palette_png");
  write_palette_png(dir + "/voc_style.png", {{0, 1, 1, 255}, {2, 2, 0, 255}, {0, 0, 0, 1}});
  const at::Tensor label = read_label_png(dir + "/voc_style.png");
  ASSERT_EQ(label.sizes(), (at::IntArrayRef{3, 4}));
  const std::vector<int64_t> expected = {0, 1, 1, 255, 2, 2, 0, 255, 0, 0, 0, 1};
  EXPECT_TRUE(label.to(at::kLong).reshape({-1}).equal(at::tensor(expected)));
  // OpenCV alone would have given the colours: the reason read_label_png reads PNGs with libpng.
  EXPECT_EQ(cv::imread(dir + "/voc_style.png", cv::IMREAD_UNCHANGED).channels(), 3);
}

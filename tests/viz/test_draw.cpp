// Drawings of detections, checked on the pixels of a crafted scene: the best box is drawn last
// (where boxes cross, its colour wins, whatever the input order), its caption lies in the image in
// its class colour where it is expected and no lower-scoring caption covers it, nothing is drawn
// outside the canvas, the legend names the classes drawn, and masks go on in ascending score.
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "detseg/viz/draw.h"

namespace detseg {
namespace {

cv::Vec3b bgr(const cv::Scalar& c) {
  return cv::Vec3b(static_cast<uchar>(c[0]), static_cast<uchar>(c[1]), static_cast<uchar>(c[2]));
}

const cv::Vec3b kBackground(90, 90, 90);

// The scene: 320 x 240, mid grey. The best box (WBC, 0.95) touches the top edge, so its caption
// cannot go above it; a lower-scoring RBC box starts at nearly the same corner (its caption would
// go to the same place) and crosses the best box's right edge; a platelet box runs off the
// bottom-right corner. Listed worst-first-but-not-sorted, so the order drawn is the code's.
std::vector<DrawnBox> scene() {
  return {{40, 4, 200, 150, 0, 0.60f, "RBC"},
          {30, 2, 150, 120, 1, 0.95f, "WBC"},
          {260, 200, 340, 260, 2, 0.40f, "Platelets"}};
}

TEST(Draw, BestCaptionVisibleInItsColourWhereExpected) {
  cv::Mat image(240, 320, CV_8UC3, cv::Scalar(90, 90, 90));
  const std::vector<DrawnBox> boxes = scene();
  const std::vector<cv::Rect> captions = layout_captions(image.size(), boxes);
  ASSERT_EQ(captions.size(), 3u);
  // 320x240: line width round(280 * 0.003) = 1, font scale 0.35, padding 2. The best caption's
  // first choice, above the box, would leave the image: clamped to the top edge at the box's left.
  const cv::Rect best = captions[1];
  EXPECT_EQ(best.tl(), cv::Point(30, 0));
  int baseline = 0;
  const cv::Size text = cv::getTextSize("WBC 0.95", cv::FONT_HERSHEY_SIMPLEX, 0.35, 1, &baseline);
  EXPECT_EQ(best.size(), cv::Size(text.width + 4, text.height + baseline + 2));
  // The RBC caption's first two choices (above its box, clamped to the top edge, and inside its
  // top-left corner) overlap it: it moved to the next, below the box's bottom-left corner.
  EXPECT_TRUE((captions[0] & best).empty()) << captions[0] << " vs " << best;
  EXPECT_EQ(captions[0].tl(), cv::Point(40, 150));
  for (const cv::Rect& r : captions) EXPECT_EQ(r & cv::Rect(0, 0, 320, 240), r) << r << " leaves the image";

  draw_boxes(image, boxes);
  const cv::Vec3b wbc = bgr(label_color(1));
  // Its padding column and its bottom row are the class colour (the text is drawn inside them).
  for (int y = best.y; y < best.y + best.height; ++y) EXPECT_EQ(image.at<cv::Vec3b>(y, best.x), wbc) << y;
  for (int x = best.x; x < best.x + best.width; ++x)
    EXPECT_EQ(image.at<cv::Vec3b>(best.y + best.height - 1, x), wbc) << x;
  // Text was written on it: some pixels of the caption are not the background colour.
  int text_pixels = 0;
  for (int y = best.y; y < best.y + best.height; ++y)
    for (int x = best.x; x < best.x + best.width; ++x) text_pixels += image.at<cv::Vec3b>(y, x) != wbc;
  EXPECT_GT(text_pixels, 20);
}

TEST(Draw, HigherScoreWinsWhereBoxesCross) {
  cv::Mat image(240, 320, CV_8UC3, cv::Scalar(90, 90, 90));
  DrawStyle no_legend;
  no_legend.legend = false;
  std::vector<DrawnBox> boxes = scene();
  draw_boxes(image, boxes, no_legend);
  // The RBC box's top edge (y = 4) crosses the WBC box's right edge (x = 150) at (150, 4): the
  // WBC's colour, the higher score's, is on top there.
  EXPECT_EQ(image.at<cv::Vec3b>(4, 150), bgr(label_color(1)));
  // Listed the other way round, the picture is the same: the order is the scores'.
  std::swap(boxes[0], boxes[1]);
  cv::Mat again(240, 320, CV_8UC3, cv::Scalar(90, 90, 90));
  draw_boxes(again, boxes, no_legend);
  EXPECT_EQ(cv::norm(image, again, cv::NORM_INF), 0);
  // With the scores swapped the RBC box is on top at the crossing.
  boxes[0].score = 0.3f;  // the WBC
  cv::Mat swapped(240, 320, CV_8UC3, cv::Scalar(90, 90, 90));
  draw_boxes(swapped, boxes, no_legend);
  EXPECT_EQ(swapped.at<cv::Vec3b>(4, 150), bgr(label_color(0)));
}

TEST(Draw, NothingOutsideTheCanvasAndTheLegendNamesTheClasses) {
  // The image is a window into a larger canvas: drawing must stay inside the window.
  cv::Mat canvas(400, 500, CV_8UC3, cv::Scalar(7, 7, 7));
  const cv::Rect window(60, 50, 320, 240);
  cv::Mat image = canvas(window);
  image.setTo(cv::Scalar(90, 90, 90));
  const std::vector<DrawnBox> boxes = scene();
  draw_boxes(image, boxes);
  for (int y = 0; y < canvas.rows; ++y)
    for (int x = 0; x < canvas.cols; ++x)
      if (!window.contains({x, y})) {
        ASSERT_EQ(canvas.at<cv::Vec3b>(y, x), cv::Vec3b(7, 7, 7)) << x << "," << y;
      }
  // The platelet box runs off the corner; its caption is still whole, inside the image.
  const cv::Rect platelet = layout_captions(image.size(), boxes)[2];
  EXPECT_LE(platelet.x + platelet.width, 320);
  EXPECT_LE(platelet.y + platelet.height, 240);
  EXPECT_EQ(image.at<cv::Vec3b>(platelet.y + platelet.height - 1, platelet.x), bgr(label_color(2)));
  // The legend: in a corner, with a swatch of each class drawn, in label order.
  const cv::Rect legend = layout_legend(image.size(), boxes);
  ASSERT_FALSE(legend.empty());
  EXPECT_EQ(legend & cv::Rect(0, 0, 320, 240), legend);
  EXPECT_TRUE(legend.x == 0 || legend.x + legend.width == 320);
  EXPECT_TRUE(legend.y == 0 || legend.y + legend.height == 240);
  for (const cv::Rect& caption : layout_captions(image.size(), boxes))  // it hides no caption here
    EXPECT_TRUE((caption & legend).empty()) << caption << " under the legend " << legend;
  std::vector<int> swatch_x;
  for (int64_t label = 0; label < 3; ++label) {
    const cv::Vec3b want = bgr(label_color(label));
    const int row = legend.y + legend.height / 2;
    for (int x = legend.x; x < legend.x + legend.width; ++x)
      if (image.at<cv::Vec3b>(row, x) == want) {
        swatch_x.push_back(x);
        break;
      }
  }
  ASSERT_EQ(swatch_x.size(), 3u) << "a swatch per class";
  EXPECT_LT(swatch_x[0], swatch_x[1]);
  EXPECT_LT(swatch_x[1], swatch_x[2]);
}

TEST(Draw, DashedBoxesAndHiddenCaptions) {
  cv::Mat image(120, 160, CV_8UC3, cv::Scalar(90, 90, 90));
  DrawnBox truth{20, 20, 100, 100, 0, 1.0f, "RBC"};
  truth.dashed = true;
  truth.show_caption = false;
  DrawStyle style;
  style.legend = false;
  EXPECT_TRUE(layout_captions(image.size(), {truth}, style)[0].empty());
  draw_boxes(image, {truth}, style);
  // Along the top edge some pixels are the colour and some are left as they were.
  int coloured = 0, left = 0;
  for (int x = 22; x < 98; ++x) (image.at<cv::Vec3b>(20, x) == kBackground ? left : coloured)++;
  EXPECT_GT(coloured, 20);
  EXPECT_GT(left, 10);
}

// A crowded picture (here 5000 boxes, as a dense annotation or a low threshold gives) gets
// captions for its 200 best boxes only, and every box is still drawn.
TEST(Draw, CrowdedPicturesCaptionTheBestTwoHundred) {
  std::vector<DrawnBox> boxes;
  for (int i = 0; i < 5000; ++i) {
    const float x = static_cast<float>((i * 37) % 600), y = static_cast<float>((i * 53) % 440);
    boxes.push_back({x, y, x + 30, y + 30, i % 3, static_cast<float>((i * 7919) % 5000) / 5000.0f, "cell"});
  }
  const std::vector<cv::Rect> captions = layout_captions(cv::Size(640, 480), boxes);
  int shown = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (captions[i].empty()) continue;
    ++shown;
    EXPECT_GE(boxes[i].score, 4800.0f / 5000.0f) << i;  // the scores are a permutation of k / 5000
  }
  EXPECT_EQ(shown, 200);
  cv::Mat image(480, 640, CV_8UC3, cv::Scalar(90, 90, 90));
  draw_boxes(image, boxes);
  EXPECT_NE(image.at<cv::Vec3b>(100 * 53 % 440, 100 * 37 % 600), kBackground);  // box 100's top-left corner
}

TEST(Draw, MasksInAscendingScore) {
  cv::Mat base(40, 40, CV_8UC3, cv::Scalar(90, 90, 90));
  cv::Mat a = cv::Mat::zeros(40, 40, CV_8U), b = cv::Mat::zeros(40, 40, CV_8U);
  a(cv::Rect(5, 5, 20, 20)).setTo(1);
  b(cv::Rect(15, 15, 20, 20)).setTo(1);
  const DrawnMask low{a, 0, 0.3f}, high{b, 1, 0.9f};
  cv::Mat one = base.clone(), two = base.clone(), wrong = base.clone();
  draw_masks(one, {high, low});
  draw_masks(two, {low, high});
  EXPECT_EQ(cv::norm(one, two, cv::NORM_INF), 0);  // the order is the scores'
  // In the overlap the best mask's tint went on last: drawing it first gives another colour.
  const DrawnMask high_first{b, 1, 0.1f};
  draw_masks(wrong, {high_first, low});
  EXPECT_NE(one.at<cv::Vec3b>(20, 20), wrong.at<cv::Vec3b>(20, 20));
  // Where the outlines cross (24, 15) the last drawn outline's colour is on top (anti-aliased,
  // so nearest to it rather than equal).
  auto distance = [](const cv::Vec3b& p, int64_t label) { return cv::norm(cv::Vec3d(p) - cv::Vec3d(bgr(label_color(label)))); };
  EXPECT_LT(distance(one.at<cv::Vec3b>(15, 24), 1), distance(one.at<cv::Vec3b>(15, 24), 0));
  EXPECT_LT(distance(wrong.at<cv::Vec3b>(15, 24), 0), distance(wrong.at<cv::Vec3b>(15, 24), 1));
}

}  // namespace
}  // namespace detseg

// Tiled (sliced) detection: the tile grid, and detections merged so that each object of an image
// whose objects straddle tile borders is found exactly once, with its whole box. The detector is a
// fake that "detects" coloured rectangles by their pixels, so in a tile it finds exactly the part
// of each object inside the tile, as a perfect model would.
#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "detseg/api/tiled_detect.h"
#include "detseg/postprocess/tiling.h"

namespace {

using detseg::Detection;

struct Object {
  int x1, y1, x2, y2;  // [x1, x2) x [y1, y2) in image pixels
  int64_t label;
};

const cv::Scalar kColours[] = {cv::Scalar(0, 0, 255), cv::Scalar(0, 255, 0)};  // label 0 red, 1 green (BGR)

cv::Mat canvas_with(const std::vector<Object>& objects, int width, int height) {
  cv::Mat image(height, width, CV_8UC3, cv::Scalar(255, 255, 255));
  for (const Object& o : objects)
    cv::rectangle(image, cv::Rect(o.x1, o.y1, o.x2 - o.x1, o.y2 - o.y1), kColours[o.label], cv::FILLED);
  return image;
}

// Each connected region of a class colour, as a detection in the image's pixels (score 0.9).
std::vector<Detection> fake_detect(const cv::Mat& image) {
  std::vector<Detection> out;
  for (int64_t label = 0; label < 2; ++label) {
    cv::Mat mask, labels, stats, centroids;
    cv::inRange(image, kColours[label], kColours[label], mask);
    const int n = cv::connectedComponentsWithStats(mask, labels, stats, centroids, 8);
    for (int i = 1; i < n; ++i) {
      if (stats.at<int>(i, cv::CC_STAT_AREA) < 4) continue;
      Detection d;
      d.x1 = static_cast<float>(stats.at<int>(i, cv::CC_STAT_LEFT));
      d.y1 = static_cast<float>(stats.at<int>(i, cv::CC_STAT_TOP));
      d.x2 = d.x1 + static_cast<float>(stats.at<int>(i, cv::CC_STAT_WIDTH));
      d.y2 = d.y1 + static_cast<float>(stats.at<int>(i, cv::CC_STAT_HEIGHT));
      d.score = 0.9f;
      d.label = label;
      d.class_name = label == 0 ? "red" : "green";
      out.push_back(d);
    }
  }
  return out;
}

std::vector<std::vector<Detection>> fake_batch(const std::vector<cv::Mat>& images, int* calls, int* tiles) {
  ++*calls;
  *tiles += static_cast<int>(images.size());
  std::vector<std::vector<Detection>> out;
  for (const cv::Mat& image : images) out.push_back(fake_detect(image));
  return out;
}

float iou(const Detection& d, const Object& o) {
  const float w = std::min(d.x2, static_cast<float>(o.x2)) - std::max(d.x1, static_cast<float>(o.x1));
  const float h = std::min(d.y2, static_cast<float>(o.y2)) - std::max(d.y1, static_cast<float>(o.y1));
  if (w <= 0 || h <= 0) return 0;
  const float a = (d.x2 - d.x1) * (d.y2 - d.y1), b = static_cast<float>((o.x2 - o.x1) * (o.y2 - o.y1));
  return w * h / (a + b - w * h);
}

// 1000 x 700 in tiles of 256 overlapping by a quarter: columns start at 0, 192, 384, 576, 744 and
// rows at 0, 192, 384, 444, so the bands x 192-256, 384-448, 576-640, 744-832 and y 192-256,
// 384-448, 444-640 are shared.
const std::vector<Object> kObjects = {
    {200, 40, 240, 80, 0},     // inside the band x 192-256: whole in two tiles
    {150, 100, 300, 140, 0},   // wider than the band: cut in both tiles of its row, whole in none
    {330, 330, 480, 480, 1},   // across the bands x 384-448 and y 384-448: cut in six tiles
    {560, 250, 600, 290, 0},   // two objects of one class 6 px apart across the band x 576-640:
    {606, 250, 660, 290, 0},   //   each cut in one tile and whole in the other
    {950, 600, 1000, 650, 1},  // on the image's right edge (no tile edge there) and across y 640
    {100, 500, 120, 520, 0},   // small, whole in the two rows that share y 444-640
};

void expect_each_found_once(const std::vector<Detection>& found, const std::vector<Object>& objects) {
  ASSERT_EQ(found.size(), objects.size());
  for (const Object& o : objects) {
    const auto best = std::max_element(found.begin(), found.end(),
                                       [&](const Detection& a, const Detection& b) { return iou(a, o) < iou(b, o); });
    EXPECT_GT(iou(*best, o), 0.99f) << "object at " << o.x1 << "," << o.y1 << " best box " << best->x1 << ","
                                    << best->y1 << "-" << best->x2 << "," << best->y2;
    EXPECT_EQ(best->label, o.label);
    EXPECT_EQ(best->class_name, o.label == 0 ? "red" : "green");
  }
}

}  // namespace

TEST(Tiling, GridCoversTheImageWithTheOverlapAndEndsAtItsEdges) {
  const std::vector<detseg::TileRect> tiles = detseg::tile_grid(1000, 700, 256, 0.25);
  std::vector<int64_t> xs, ys;
  for (const auto& t : tiles) {
    if (std::find(xs.begin(), xs.end(), t.x) == xs.end()) xs.push_back(t.x);
    if (std::find(ys.begin(), ys.end(), t.y) == ys.end()) ys.push_back(t.y);
    EXPECT_EQ(t.width, 256);
    EXPECT_EQ(t.height, 256);
  }
  EXPECT_EQ(xs, (std::vector<int64_t>{0, 192, 384, 576, 744}));
  EXPECT_EQ(ys, (std::vector<int64_t>{0, 192, 384, 444}));
  EXPECT_EQ(tiles.size(), 20u);
  // Smaller than a tile: one tile, the image.
  const std::vector<detseg::TileRect> one = detseg::tile_grid(200, 100, 256, 0.2);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].width, 200);
  EXPECT_EQ(one[0].height, 100);
  // No overlap: tiles side by side, the last moved back to the edge.
  const std::vector<detseg::TileRect> flat = detseg::tile_grid(600, 256, 256, 0.0);
  ASSERT_EQ(flat.size(), 3u);
  EXPECT_EQ(flat[1].x, 256);
  EXPECT_EQ(flat[2].x, 344);
}

TEST(Tiling, CutEdgesCountOnlyEdgesInsideTheImage) {
  const detseg::TileRect tile{192, 0, 256, 256};  // left edge inside a 1000 x 700 image, top edge on the image's
  const at::Tensor boxes = at::tensor({193.f, 0.f, 230.f, 40.f,     // at the left edge (and the image's top)
                                       300.f, 100.f, 447.f, 255.f,  // at the right and bottom edges
                                       250.f, 50.f, 300.f, 90.f},   // inside
                                      at::kFloat)
                               .reshape({3, 4});
  const at::Tensor cut = detseg::cut_edges(boxes, tile, 1000, 700, 2.56);
  EXPECT_EQ(cut[0].item<int64_t>(), detseg::kTileLeft);
  EXPECT_EQ(cut[1].item<int64_t>(), detseg::kTileRight | detseg::kTileBottom);
  EXPECT_EQ(cut[2].item<int64_t>(), 0);
}

// The objects straddle tile borders in every way; each is found exactly once with its whole box.
TEST(Tiling, ObjectsAcrossTileBordersAreFoundOnceWhole) {
  const cv::Mat image = canvas_with(kObjects, 1000, 700);
  detseg::TilingOptions options;
  options.tile_size = 256;
  options.overlap = 0.25;
  options.include_full_image = false;
  int calls = 0, tiles = 0;
  const std::vector<Detection> found = detseg::detect_tiled(
      image, options, 8, [&](const std::vector<cv::Mat>& batch) { return fake_batch(batch, &calls, &tiles); });
  EXPECT_EQ(tiles, 20);
  EXPECT_EQ(calls, 3);  // 20 tiles, 8 per pass
  expect_each_found_once(found, kObjects);

  // What the tiles gave before merging: every object more than once, and pieces of boxes.
  size_t raw = 0;
  for (const auto& t : detseg::tile_grid(1000, 700, 256, 0.25))
    raw += fake_detect(image(cv::Rect(static_cast<int>(t.x), static_cast<int>(t.y), 256, 256))).size();
  EXPECT_GT(raw, 2 * kObjects.size());
}

// With the whole image as well (the fake finds every object whole there), still once each.
TEST(Tiling, TheWholeImagePassAddsNoDuplicates) {
  const cv::Mat image = canvas_with(kObjects, 1000, 700);
  detseg::TilingOptions options;
  options.tile_size = 256;
  options.overlap = 0.25;
  options.include_full_image = true;
  int calls = 0, tiles = 0;
  const std::vector<Detection> found = detseg::detect_tiled(
      image, options, 4, [&](const std::vector<cv::Mat>& batch) { return fake_batch(batch, &calls, &tiles); });
  EXPECT_EQ(tiles, 21);
  EXPECT_EQ(calls, 6);  // 5 passes of 4 tiles, then the whole image
  expect_each_found_once(found, kObjects);
}

// An object longer than two tiles: three pieces, two seams, joined into one box.
TEST(Tiling, ALongObjectCutByTwoSeamsIsJoinedFromThreePieces) {
  const std::vector<Object> objects = {{100, 60, 560, 90, 1}};
  const cv::Mat image = canvas_with(objects, 700, 256);
  detseg::TilingOptions options;
  options.tile_size = 256;
  options.overlap = 0.1;  // columns at 0, 230, 444
  options.include_full_image = false;
  int calls = 0, tiles = 0;
  const std::vector<Detection> found = detseg::detect_tiled(
      image, options, 1, [&](const std::vector<cv::Mat>& batch) { return fake_batch(batch, &calls, &tiles); });
  EXPECT_EQ(tiles, 3);
  expect_each_found_once(found, objects);
}

// Instance masks are not tiled: a detection carrying one is refused in one line.
TEST(Tiling, DetectionsWithMasksAreRefused) {
  const cv::Mat image = canvas_with(kObjects, 1000, 700);
  detseg::TilingOptions options;
  options.tile_size = 256;
  try {
    detseg::detect_tiled(image, options, 1, [](const std::vector<cv::Mat>& batch) {
      std::vector<std::vector<Detection>> out(batch.size());
      Detection d;
      d.x2 = d.y2 = 10;
      d.mask = cv::Mat::zeros(256, 256, CV_8U);
      out[0].push_back(d);
      return out;
    });
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("instance masks are not tiled"), std::string::npos) << e.what();
  }
}

// The merge alone, on detections worked out by hand (tiles 0-3, classes 0 and 1):
//   rows 0, 1: whole, class 0, IoU 380 / 420 = 0.90 -> per-class NMS keeps row 0 (0.9);
//   row 8: whole, class 1, on row 1's place -> kept (another class);
//   rows 2, 3: class 0, cut at tile 0's right edge and tile 1's left edge, y extents [50, 70] and
//     [51, 70] (1-D IoU 19 / 20) -> joined: the union [80, 50, 120, 70] with row 2's 0.7 (IOS alone,
//     76 / 400, would not join them);
//   row 4: row 3's box but class 1 -> not joined, kept as it is;
//   row 5: class 0, tile 0, cut right, below row 3 (y [72, 90], 2 px from [51, 70]: the pieces meet
//     but their y extents do not overlap) -> not joined, kept;
//   rows 6, 7: a piece (0.95) inside whole row 7 (0.3) of its class -> the piece is dropped.
TEST(Tiling, MergeWorkedByHand) {
  const at::Tensor boxes = at::tensor({10.f,  10.f,  30.f,  30.f,    // 0
                                       11.f,  10.f,  31.f,  30.f,    // 1
                                       80.f,  50.f,  100.f, 70.f,    // 2
                                       96.f,  51.f,  120.f, 70.f,    // 3
                                       96.f,  51.f,  120.f, 70.f,    // 4
                                       80.f,  72.f,  100.f, 90.f,    // 5
                                       200.f, 200.f, 230.f, 260.f,   // 6
                                       200.f, 200.f, 260.f, 260.f,   // 7
                                       11.f,  10.f,  31.f,  30.f},   // 8
                                      at::kFloat)
                               .reshape({9, 4});
  const at::Tensor scores = at::tensor({0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.95f, 0.3f, 0.85f}, at::kFloat);
  const at::Tensor classes = at::tensor(std::vector<int64_t>{0, 0, 0, 0, 1, 0, 0, 0, 1}, at::kLong);
  const at::Tensor tiles = at::tensor(std::vector<int64_t>{0, 1, 0, 1, 1, 0, 3, 2, 1}, at::kLong);
  const at::Tensor cut = at::tensor(std::vector<int64_t>{0, 0, detseg::kTileRight, detseg::kTileLeft, detseg::kTileLeft,
                                                         detseg::kTileRight, detseg::kTileRight, 0, 0},
                                    at::kLong);
  const detseg::MergedDetections merged = detseg::merge_tile_detections(boxes, scores, classes, tiles, cut, {});
  ASSERT_EQ(merged.boxes.size(0), 6);
  EXPECT_EQ(std::vector<int64_t>(merged.source.data_ptr<int64_t>(), merged.source.data_ptr<int64_t>() + 6),
            (std::vector<int64_t>{0, 8, 2, 4, 5, 7}));
  const std::vector<float> expected_scores = {0.9f, 0.85f, 0.7f, 0.5f, 0.4f, 0.3f};
  const std::vector<std::vector<float>> expected_boxes = {{10, 10, 30, 30},   {11, 10, 31, 30},  {80, 50, 120, 70},
                                                          {96, 51, 120, 70},  {80, 72, 100, 90}, {200, 200, 260, 260}};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(merged.scores[i].item<float>(), expected_scores[static_cast<size_t>(i)]) << i;
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_FLOAT_EQ(merged.boxes[i][c].item<float>(), expected_boxes[static_cast<size_t>(i)][static_cast<size_t>(c)])
          << i << "," << c;
  }
}

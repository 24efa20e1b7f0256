#include "detseg/api/tiled_detect.h"

#include <algorithm>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/postprocess/tiling.h"

namespace detseg {

TilingOptions tiling_options(const PipelineConfig& config) {
  TilingOptions o;
  o.tile_size = config.postprocess.tile_size;
  o.overlap = config.postprocess.tile_overlap;
  o.include_full_image = config.postprocess.tile_include_full_image;
  o.iou_threshold = config.postprocess.nms_iou_threshold;
  return o;
}

std::vector<Detection> detect_tiled(const cv::Mat& image, const TilingOptions& options, int64_t batch,
                                    const DetectBatch& detect) {
  DETSEG_CHECK(options.tile_size > 0, "detect_tiled: the tile size must be positive");
  const std::vector<TileRect> tiles = tile_grid(image.cols, image.rows, options.tile_size, options.overlap);
  const double margin = cut_margin(options.tile_size);
  // Every detection in image pixels, with the tile it came from and the edges that cut it.
  std::vector<Detection> all;
  std::vector<float> boxes, scores;
  std::vector<int64_t> classes, tile_of, cut;
  auto add = [&](std::vector<Detection> found, int64_t tile_index, const TileRect* tile) {
    const size_t first = all.size();
    for (Detection& d : found) {
      DETSEG_CHECK(d.mask.empty(), "--tile: instance masks are not tiled; predict this model without --tile");
      if (tile != nullptr) {
        d.x1 += static_cast<float>(tile->x), d.x2 += static_cast<float>(tile->x);
        d.y1 += static_cast<float>(tile->y), d.y2 += static_cast<float>(tile->y);
      }
      boxes.insert(boxes.end(), {d.x1, d.y1, d.x2, d.y2});
      scores.push_back(d.score);
      classes.push_back(d.label);
      tile_of.push_back(tile_index);
      all.push_back(std::move(d));
    }
    const int64_t n = static_cast<int64_t>(all.size() - first);
    if (tile == nullptr || n == 0) {
      cut.insert(cut.end(), static_cast<size_t>(n), 0);
      return;
    }
    const at::Tensor added = at::tensor(std::vector<float>(boxes.end() - 4 * n, boxes.end()), at::kFloat).reshape({n, 4});
    const at::Tensor bits = cut_edges(added, *tile, image.cols, image.rows, margin);
    cut.insert(cut.end(), bits.data_ptr<int64_t>(), bits.data_ptr<int64_t>() + n);
  };
  const int64_t step = std::max<int64_t>(1, batch);
  for (size_t first = 0; first < tiles.size(); first += static_cast<size_t>(step)) {
    const size_t last = std::min(tiles.size(), first + static_cast<size_t>(step));
    std::vector<cv::Mat> crops;
    for (size_t i = first; i < last; ++i)
      crops.push_back(image(cv::Rect(static_cast<int>(tiles[i].x), static_cast<int>(tiles[i].y),
                                     static_cast<int>(tiles[i].width), static_cast<int>(tiles[i].height))));
    std::vector<std::vector<Detection>> found = detect(crops);
    DETSEG_CHECK(found.size() == crops.size(), "detect_tiled: ", crops.size(), " tiles gave ", found.size(), " results");
    for (size_t i = first; i < last; ++i) add(std::move(found[i - first]), static_cast<int64_t>(i), &tiles[i]);
  }
  // One tile that is the whole image already is the whole-image pass.
  const bool one_tile_is_image = tiles.size() == 1 && tiles[0].width == image.cols && tiles[0].height == image.rows;
  if (options.include_full_image && !one_tile_is_image) add(std::move(detect({image}).at(0)), -1, nullptr);
  if (all.empty()) return {};

  const int64_t n = static_cast<int64_t>(all.size());
  TileMergeOptions merge;
  merge.iou_threshold = options.iou_threshold;
  merge.match_threshold = options.match_threshold;
  const MergedDetections merged = merge_tile_detections(
      at::tensor(boxes, at::kFloat).reshape({n, 4}), at::tensor(scores, at::kFloat), at::tensor(classes, at::kLong),
      at::tensor(tile_of, at::kLong), at::tensor(cut, at::kLong), merge);
  std::vector<Detection> out;
  const auto box = merged.boxes.accessor<float, 2>();
  const auto score = merged.scores.accessor<float, 1>();
  const auto source = merged.source.accessor<int64_t, 1>();
  for (int64_t i = 0; i < merged.boxes.size(0); ++i) {
    Detection d = all[static_cast<size_t>(source[i])];
    d.x1 = box[i][0], d.y1 = box[i][1], d.x2 = box[i][2], d.y2 = box[i][3];
    d.score = score[i];
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace detseg

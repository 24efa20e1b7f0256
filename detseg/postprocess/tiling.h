// Implements: sliced inference's geometry and merge (SAHI's idea, for images far larger than the
// model's input, whose objects are a few pixels wide): the overlapping tiles that cover an image,
// which detections a tile edge cut, and the merge of all tiles' detections into one list where
// each object appears once:
//   1. Whole detections (touching no tile edge inside the image; the whole-image pass's are all
//      whole): per-class NMS across tiles at the IoU threshold (an object inside two overlapping
//      tiles is found in both).
//   2. Cut detections (touching, within a margin, an edge of their tile that lies inside the image:
//      the object may go on past it) are joined across tiles: two pieces of one class from
//      different tiles that meet, one cut at a right (bottom) edge and the other at a left (top)
//      edge, and that agree along that edge (1-D IoU of their extents along it >= the match
//      threshold), are one object; so are two pieces whose intersection covers the match threshold
//      of the smaller (IOS, SAHI's NMM metric). Joining is transitive (a long object cut by two
//      seams is joined from three pieces); a group becomes the union of its boxes with its best
//      score.
//   3. A joined group that a whole detection of its class covers (their intersection is at least
//      the match threshold of the group's box) is dropped: the whole detection is the fuller view
//      of the same object (an object inside the overlap band is whole in one tile, cut in the
//      other).
// Torch-free callers see only tensors and plain structs; the driver that cuts images and runs a
// model on the tiles is api/tiled_detect.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace detseg {

struct TileRect {
  int64_t x = 0, y = 0, width = 0, height = 0;
};

// Tiles of size x size pixels covering a width x height image, row-major. Neighbours start
// floor(size * (1 - overlap)) pixels apart; the last column and row are moved back to end at the
// image's far edge (so they overlap their neighbour more, and no tile is smaller). An image
// narrower (or lower) than a tile has one column (row), as wide (high) as the image.
std::vector<TileRect> tile_grid(int64_t width, int64_t height, int64_t size, double overlap);

// Which of a tile's edges a box touches, as bits, counting only edges inside the image.
enum TileEdge : int64_t { kTileLeft = 1, kTileTop = 2, kTileRight = 4, kTileBottom = 8 };

// For boxes [N, 4] in image pixels found in `tile`: int64 [N], the TileEdge bits of the edges each
// box comes within `margin` pixels of (0: whole).
at::Tensor cut_edges(const at::Tensor& boxes, const TileRect& tile, int64_t image_width, int64_t image_height,
                     double margin);

// The margin cut_edges uses for a tile of `size`: a model's box for a cut object ends near, not
// exactly on, the edge.
double cut_margin(int64_t size);

struct TileMergeOptions {
  double iou_threshold = 0.5;    // NMS among whole detections
  double match_threshold = 0.5;  // joining pieces, and a whole detection covering a group
};

struct MergedDetections {
  at::Tensor boxes;   // float [K, 4], by decreasing score
  at::Tensor scores;  // float [K]
  at::Tensor source;  // int64 [K]: the input row each came from (the best-scoring piece of a group)
};

// boxes float [N, 4] in image pixels, scores [N], classes int64 [N], tiles int64 [N] (the tile each
// came from; detections of one tile are never joined), cut int64 [N] (cut_edges' bits). Every
// detection that survives is kept (no overall limit: each tile had the model's own).
MergedDetections merge_tile_detections(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& classes,
                                       const at::Tensor& tiles, const at::Tensor& cut, const TileMergeOptions& options);

}  // namespace detseg

// Implements: the COCO mask API (pycocotools' maskApi.c semantics, our own code): run-length
// encoding of binary masks, its compressed string form, polygon and box rasterization, area,
// bounding box, union/intersection and IoU with the crowd rule. Masks are column-major
// (Fortran order, index x * height + y) like pycocotools; torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/readers/coco.h"

namespace detseg {

// Encodes a column-major mask [W, H] (mask[x * h + y] != 0 is foreground).
CocoRle rle_encode(const uint8_t* mask, int64_t height, int64_t width);
// Decodes into a column-major buffer of height * width bytes (0/1).
void rle_decode(const CocoRle& rle, uint8_t* mask);
// Row-major helpers for images (mask[y * w + x]).
CocoRle rle_encode_row_major(const uint8_t* mask, int64_t height, int64_t width);
void rle_decode_row_major(const CocoRle& rle, uint8_t* mask);

// The compressed "counts" string (6 bits a character, deltas from the count two back).
std::string rle_to_string(const CocoRle& rle);
// Throws Error on characters outside the alphabet or a truncated string.
CocoRle rle_from_string(const std::string& counts, int64_t height, int64_t width);

// Why a polygon cannot be rasterized into a height x width image ("" when it can). rleFrPoly walks
// every edge at 5x resolution, so its work and memory grow with the coordinates: coordinates must
// be finite and within 8x the image's larger side (and 4e8), and the edges at most 16M steps long in all.
std::string polygon_problem(const double* xy, size_t num_points, int64_t height, int64_t width);
// Why no mask of a height x width image can exist ("" when it can): run lengths are uint32, so
// height * width must stay below 2^32 (polygon_problem checks this too).
std::string mask_size_problem(int64_t height, int64_t width);

// Rasterizes one polygon x0,y0,x1,y1,... (`num_points` points) exactly as rleFrPoly does; throws
// Error with polygon_problem's reason for a polygon out of bounds.
CocoRle rle_from_polygon(const double* xy, size_t num_points, int64_t height, int64_t width);
// Rasterizes an xywh box (as a 4-point polygon, like rleFrBbox).
CocoRle rle_from_box(const double* xywh, int64_t height, int64_t width);
// Union (or intersection) of masks of equal size; an empty list gives a 0x0 RLE.
CocoRle rle_merge(const std::vector<CocoRle>& rles, bool intersect = false);

// The RLE of any segmentation as pycocotools' annToRLE makes it: polygons are rasterized and
// merged (a first polygon of exactly 4 numbers is read as a box, as frPyObjects does), RLEs are
// used as given. `height`/`width` are the image's.
CocoRle segmentation_to_rle(const CocoSegmentation& segmentation, int64_t height, int64_t width);

// Number of foreground pixels.
uint64_t rle_area(const CocoRle& rle);
// Tight xywh box of the foreground (zeros when empty), as rleToBbox.
void rle_to_box(const CocoRle& rle, double* xywh);

// IoU of two masks; with `crowd` the union is the detection's area (pycocotools' crowd rule).
// Returns -1 when sizes differ, as rleIou does.
double rle_iou(const CocoRle& dt, const CocoRle& gt, bool crowd);
// IoU of two xywh boxes with the same crowd rule (bbIou).
double box_iou_coco(const double* dt, const double* gt, bool crowd);

}  // namespace detseg

// Implements: the one in-memory form of an annotated detection dataset: a faithful copy of a COCO
// instances JSON (ids as in the file, boxes in COCO xywh absolute pixels, segmentations as given).
// The COCO reader fills it, the VOC reader fills it too (so `detseg convert voc` is "read VOC, write
// COCO"), the evaluator reads ground truth from it, and data/ turns it into training examples.
// Torch-free on purpose: evaluation and conversion need no tensors.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace detseg {

// A COCO run-length encoding: counts of alternating 0/1 runs in column-major order, starting with 0.
struct CocoRle {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint32_t> counts;
};

// One annotation's segmentation: polygons (each x0,y0,x1,y1,... in pixels) or an RLE, or none.
struct CocoSegmentation {
  enum Kind { kNone, kPolygons, kRle } kind = kNone;
  std::vector<std::vector<double>> polygons;
  CocoRle rle;
};

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  double bbox[4] = {0, 0, 0, 0};  // x, y, width, height in pixels (COCO convention)
  double area = 0;                // as written in the file (COCO: polygon area, not w*h)
  bool iscrowd = false;
  bool ignore = false;            // optional "ignore" field; VOC "difficult" maps here
  bool truncated = false;         // VOC only
  double score = 1.0;             // detections files only
  CocoSegmentation segmentation;
};

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int64_t width = 0;
  int64_t height = 0;
};

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
};

struct CocoDataset {
  std::string source;  // file it was read from, for error messages
  std::vector<CocoImage> images;
  std::vector<CocoCategory> categories;
  std::vector<CocoAnnotation> annotations;

  // Lookup tables, rebuilt by index(): image id -> position in `images`, category id -> position
  // in `categories` (which is also the contiguous label, 0-based), image position -> annotation
  // positions.
  std::unordered_map<int64_t, int64_t> image_index;
  std::unordered_map<int64_t, int64_t> category_index;
  std::vector<std::vector<int64_t>> annotations_by_image;

  // Rebuilds the lookup tables; throws Error naming `source` on duplicate ids or annotations that
  // point at an unknown image or category.
  void index();
};

// Reads a COCO instances JSON (simdjson). Throws Error "file:line:column: ..." on malformed JSON
// and "file: annotations[i].field: ..." on missing or mistyped fields.
CocoDataset read_coco(const std::string& path);

// Reads a COCO *results* JSON (a list of {image_id, category_id, bbox|segmentation, score}) and
// checks it against the ground truth: unknown image or category ids are errors naming the entry.
CocoDataset read_coco_results(const std::string& path, const CocoDataset& ground_truth);
// The same from a results file already parsed by load_json (core/json.h), so the parse can run
// while the ground truth is read.
struct JsonDocument;
CocoDataset read_coco_results(const JsonDocument& parsed, const CocoDataset& ground_truth);

// Detections held in memory (from the eval loop) turned into the same form read_coco_results
// gives: checked against the ground truth, ids 1..N, no crowd, area as pycocotools' loadRes sets
// it (w*h in box mode; the mask's area, and its box where none is set, otherwise).
CocoDataset coco_results_from(std::vector<CocoAnnotation> detections, const CocoDataset& ground_truth,
                              bool box_mode = true);
void finish_coco_result(CocoAnnotation& detection, int64_t index, bool box_mode, const CocoImage& image);

// Writes a COCO instances JSON atomically (RLE segmentations as uncompressed counts lists).
void write_coco(const CocoDataset& dataset, const std::string& path);

// JSON writing pieces shared with the COCO results writer: a quoted, escaped string; a number in
// its shortest exact form (integers without a decimal point); `, "segmentation": ...` (nothing
// for kNone).
void append_json_string(std::string& out, const std::string& s);
void append_json_number(std::string& out, double value);
void append_segmentation_json(std::string& out, const CocoSegmentation& segmentation);
// `"image_id": .., "category_id": .., "bbox": [x, y, w, h]` of one annotation or detection.
void append_ids_and_box_json(std::string& out, const CocoAnnotation& annotation);

}  // namespace detseg

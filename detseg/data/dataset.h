// Implements: datasets that turn annotations into Examples. DetectionDataset wraps a CocoDataset
// (read from COCO JSON or VOC XML): category ids become contiguous labels 0..K-1 (and back), boxes
// are checked once at construction by the configured policy, images are decoded on demand.
// SegmentationDataset wraps a segmentation folder (image + class-index PNG).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detseg/data/example.h"
#include "detseg/data/image_codec.h"
#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/seg_folder.h"

namespace detseg {

// What to do with a box that sticks out of its image. Boxes of zero or negative size (after
// clipping, for kClip) are always dropped. Every case is counted in BoxStats.
enum class BoxPolicy { kClip, kDrop };
BoxPolicy parse_box_policy(const std::string& name);  // "clip" | "drop"; ConfigError otherwise

struct DetectionDatasetOptions {
  std::string image_dir;              // folder the COCO file_name entries are relative to
  BoxPolicy invalid_boxes = BoxPolicy::kClip;
  bool with_masks = false;            // rasterize polygon/RLE segmentations into Example::masks
  bool skip_crowd = false;            // drop iscrowd annotations (else kept, flagged in iscrowd)
  bool skip_ignored = false;          // drop "ignore" annotations (VOC difficult)
  bool skip_empty_images = false;     // leave out images with no (kept) annotation (training)
  bool check_image_size = true;       // decoded size must equal the file's width/height
};

struct BoxStats {
  int64_t total = 0;          // annotations seen
  int64_t kept = 0;
  int64_t clipped = 0;        // outside the image, clipped (kClip)
  int64_t dropped_outside = 0;  // outside the image, dropped (kDrop)
  int64_t dropped_degenerate = 0;  // zero/negative width or height, or NaN
  int64_t dropped_filtered = 0;    // crowd/ignored left out on request
};

class DetectionDataset {
 public:
  // Throws Error for an empty dataset, annotations naming an unknown image or category, or an
  // image with a non-positive size.
  DetectionDataset(CocoDataset coco, DetectionDatasetOptions options);

  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  // Decodes image `index` (0..size-1) with its boxes, labels, crowd flags and masks.
  Example get(int64_t index) const;

  int64_t num_classes() const { return static_cast<int64_t>(coco_.categories.size()); }
  int64_t label_to_category_id(int64_t label) const;
  int64_t category_id_to_label(int64_t category_id) const;  // -1 when unknown
  std::vector<std::string> class_names() const;
  const CocoDataset& coco() const { return coco_; }
  const BoxStats& box_stats() const { return stats_; }
  const DetectionDatasetOptions& options() const { return options_; }
  // Position in coco().images of dataset item `index`.
  int64_t image_position(int64_t index) const { return records_[static_cast<size_t>(index)].image; }

 private:
  struct Record {
    int64_t image = 0;                // position in coco_.images
    at::Tensor boxes;                 // [N, 4] float32 xyxy, checked
    at::Tensor classes;               // [N] int64
    at::Tensor iscrowd;               // [N] bool
    std::vector<int64_t> annotations;  // positions in coco_.annotations (for masks)
  };
  CocoDataset coco_;
  DetectionDatasetOptions options_;
  std::vector<Record> records_;
  BoxStats stats_;
};

// Rasterizes one COCO segmentation (polygons or RLE) to an [height, width] uint8 0/1 mask.
at::Tensor segmentation_to_mask(const CocoSegmentation& segmentation, int64_t height, int64_t width);

class SegmentationDataset {
 public:
  explicit SegmentationDataset(SegFolder folder);  // Error when the folder has no samples
  int64_t size() const { return static_cast<int64_t>(folder_.samples.size()); }
  // Image + label map ([H, W] uint8, void values mapped to 255). Error naming the label file when
  // its size differs from the image or a value is >= num_classes and not void.
  Example get(int64_t index) const;
  const SegFolder& folder() const { return folder_; }

 private:
  SegFolder folder_;
  LabelValues values_;  // raw pixel value -> label (void values -> 255), and which are allowed
};

}  // namespace detseg

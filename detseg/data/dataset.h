// Implements: datasets that turn annotations into Examples. DetectionDataset wraps a CocoDataset
// (read from COCO JSON or VOC XML): category ids become contiguous labels 0..K-1 (and back), boxes
// are checked once at construction by the configured policy, images are decoded on demand.
// SegmentationDataset wraps a segmentation folder (image + class-index PNG).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
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

// What a data set does with an image it cannot use (missing, unreadable, not an image, too damaged
// to decode: image_codec.h): stop with the file's name, or leave it out. A left-out image's get()
// returns an Example without an image, which the Loader leaves out (loader.h).
enum class BadImagePolicy { kStop, kSkip };
BadImagePolicy parse_bad_image_policy(const std::string& name);  // "stop" | "skip"; ConfigError otherwise

// The images a data set left out, each with why: a warning for each the first time (once per
// process), and all of them in one warning when the data set goes (the end of a training run or
// of an evaluation). Thread-safe.
class SkippedImages {
 public:
  explicit SkippedImages(std::string source) : source_(std::move(source)) {}
  ~SkippedImages();
  SkippedImages(const SkippedImages&) = delete;
  SkippedImages& operator=(const SkippedImages&) = delete;
  void add(const std::string& file, const std::string& reason);
  std::vector<std::string> files() const;

 private:
  std::string source_;
  mutable std::mutex mutex_;
  std::vector<std::string> files_;
};

// The annotation's width and height against the decoded, upright image: "" when they agree, else
// the one-line error (naming `path`, `source` and, for a turned image, its EXIF orientation; an
// annotation made on the raster as stored, before a 90-degree turn, is told as such).
std::string image_size_mismatch(const std::string& path, int64_t width, int64_t height, int orientation,
                                int64_t annotated_width, int64_t annotated_height, const std::string& source);

struct DetectionDatasetOptions {
  std::string image_dir;              // folder the COCO file_name entries are relative to
  BoxPolicy invalid_boxes = BoxPolicy::kClip;
  bool with_masks = false;            // rasterize polygon/RLE segmentations into Example::masks
  bool skip_crowd = false;            // drop iscrowd annotations (else kept, flagged in iscrowd)
  bool skip_ignored = false;          // drop "ignore" annotations (VOC difficult)
  bool skip_empty_images = false;     // leave out images with no (kept) annotation (training)
  bool check_image_size = true;       // decoded size must equal the file's width/height
  BadImagePolicy bad_images = BadImagePolicy::kStop;
  // The label order, by class name: label k is the category named class_order[k] (a model's
  // classes, from its checkpoint or a label map), whatever the file's order or ids. A category
  // whose name is not listed is an error naming both lists; a listed class the file lacks has no
  // category (label_to_category_id: -1). Empty: the file's category order.
  std::vector<std::string> class_order;
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
  // Throws Error for an empty dataset, annotations naming an unknown image or category, an image
  // with a non-positive size, or categories with empty or duplicate names; ConfigError for a
  // category that options.class_order does not list.
  DetectionDataset(CocoDataset coco, DetectionDatasetOptions options);

  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  // Decodes image `index` (0..size-1) with its boxes, labels, crowd flags and masks. Under
  // bad_images kSkip an image it cannot use gives an Example without an image (left out).
  Example get(int64_t index) const;
  std::vector<std::string> skipped_images() const { return skipped_->files(); }

  int64_t num_classes() const { return static_cast<int64_t>(class_names_.size()); }
  int64_t label_to_category_id(int64_t label) const;        // -1: a class the file does not have
  int64_t category_id_to_label(int64_t category_id) const;  // -1 when unknown
  const std::vector<std::string>& class_names() const { return class_names_; }  // label order
  const CocoDataset& coco() const { return coco_; }
  const BoxStats& box_stats() const { return stats_; }
  const DetectionDatasetOptions& options() const { return options_; }
  // Position in coco().images of dataset item `index`.
  int64_t image_position(int64_t index) const { return records_[static_cast<size_t>(index)].image; }

 private:
  void assign_labels();  // class_names_, label_category_ids_, category_labels_ from the options

  struct Record {
    int64_t image = 0;                // position in coco_.images
    at::Tensor boxes;                 // [N, 4] float32 xyxy, checked
    at::Tensor classes;               // [N] int64
    at::Tensor iscrowd;               // [N] bool
    std::vector<int64_t> annotations;  // positions in coco_.annotations (for masks)
  };
  CocoDataset coco_;
  DetectionDatasetOptions options_;
  std::vector<std::string> class_names_;     // label -> name
  std::vector<int64_t> label_category_ids_;  // label -> the file's category id, or -1
  std::unordered_map<int64_t, int64_t> category_labels_;  // the file's category id -> label
  std::vector<Record> records_;
  BoxStats stats_;
  std::shared_ptr<SkippedImages> skipped_;
};

// "['a', 'b']": class names for messages.
std::string quoted_names(const std::vector<std::string>& names);

// Rasterizes one COCO segmentation (polygons or RLE) to an [height, width] uint8 0/1 mask.
at::Tensor segmentation_to_mask(const CocoSegmentation& segmentation, int64_t height, int64_t width);

class SegmentationDataset {
 public:
  // Error when the folder has no samples. `bad_images` as DetectionDatasetOptions::bad_images (for
  // the images; a label map it cannot use always stops).
  explicit SegmentationDataset(SegFolder folder, BadImagePolicy bad_images = BadImagePolicy::kStop);
  int64_t size() const { return static_cast<int64_t>(folder_.samples.size()); }
  // Image + label map ([H, W] uint8, void values mapped to 255). Error naming the label file when
  // its size differs from the image or a value is >= num_classes and not void.
  Example get(int64_t index) const;
  const SegFolder& folder() const { return folder_; }
  std::vector<std::string> skipped_images() const { return skipped_->files(); }

 private:
  SegFolder folder_;
  LabelValues values_;  // raw pixel value -> label (void values -> 255), and which are allowed
  BadImagePolicy bad_images_;
  std::shared_ptr<SkippedImages> skipped_;
};

}  // namespace detseg

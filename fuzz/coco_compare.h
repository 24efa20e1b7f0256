// Implements: field-by-field equality of two CocoDatasets, for the harnesses' round-trip checks
// (what write_coco writes must read back as the same data set).
#pragma once

#include <cstring>
#include <string>

#include "detseg/data/readers/coco.h"
#include "fuzz_common.h"

namespace detseg::fuzz {

inline bool same_number(double a, double b) { return a == b || (a != a && b != b); }

// Empty when equal, else the first difference.
inline std::string coco_difference(const CocoDataset& a, const CocoDataset& b) {
  if (a.images.size() != b.images.size()) return "image count";
  if (a.categories.size() != b.categories.size()) return "category count";
  if (a.annotations.size() != b.annotations.size()) return "annotation count";
  for (size_t i = 0; i < a.images.size(); ++i) {
    const auto &x = a.images[i], &y = b.images[i];
    if (x.id != y.id || x.file_name != y.file_name || x.width != y.width || x.height != y.height)
      return str("images[", i, "]");
  }
  for (size_t i = 0; i < a.categories.size(); ++i) {
    const auto &x = a.categories[i], &y = b.categories[i];
    if (x.id != y.id || x.name != y.name || x.supercategory != y.supercategory) return str("categories[", i, "]");
  }
  for (size_t i = 0; i < a.annotations.size(); ++i) {
    const auto &x = a.annotations[i], &y = b.annotations[i];
    bool same = x.id == y.id && x.image_id == y.image_id && x.category_id == y.category_id &&
                same_number(x.area, y.area) && x.iscrowd == y.iscrowd && x.ignore == y.ignore &&
                x.truncated == y.truncated && x.segmentation.kind == y.segmentation.kind;
    for (int k = 0; k < 4; ++k) same = same && same_number(x.bbox[k], y.bbox[k]);
    if (same && x.segmentation.kind == CocoSegmentation::kPolygons) same = x.segmentation.polygons == y.segmentation.polygons;
    if (same && x.segmentation.kind == CocoSegmentation::kRle)
      same = x.segmentation.rle.height == y.segmentation.rle.height &&
             x.segmentation.rle.width == y.segmentation.rle.width && x.segmentation.rle.counts == y.segmentation.rle.counts;
    if (!same) return str("annotations[", i, "]");
  }
  return "";
}

// write_coco(data) must read back as `data`: an Error on the way back, or a difference, is a finding.
inline void check_coco_round_trip(const CocoDataset& data, const std::string& name) {
  const std::string path = (scratch_dir() / name).string();
  try {
    write_coco(data, path);
  } catch (const Error&) {
    return;  // refusing to write (e.g. a non-finite number) is a clean answer
  }
  CocoDataset back;
  try {
    back = read_coco(path);
  } catch (const Error& e) {
    finding(std::string("write_coco output does not read back: ") + e.what());
  }
  const std::string diff = coco_difference(data, back);
  if (!diff.empty()) finding("write_coco output reads back different: " + diff);
}

}  // namespace detseg::fuzz

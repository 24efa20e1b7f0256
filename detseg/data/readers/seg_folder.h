// Implements: semantic-segmentation folders: an image folder and a label folder of single-channel
// PNGs holding one class id per pixel, matched by file stem. CamVid (SegNet layout) is
// <root>/<split>/X.png + <root>/<split>annot/X.png.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detseg {

constexpr int kIgnoreLabel = 255;

struct SegFolderOptions {
  std::string image_dir;        // images (.png/.jpg/.jpeg)
  std::string label_dir;        // label PNGs with the same stem
  int64_t num_classes = 0;      // > 0: pixel values must be < num_classes, or listed below
  std::vector<int> void_values; // raw values that mean "unlabelled": mapped to kIgnoreLabel
};

struct SegSample {
  std::string image_path;
  std::string label_path;
};

struct SegFolder {
  std::vector<SegSample> samples;  // sorted by image file name
  SegFolderOptions options;
};

// Lists image/label pairs. Throws Error naming the folder when it is missing or empty, and the file
// when an image has no label.
SegFolder read_seg_folder(const SegFolderOptions& options);

// CamVid (SegNet) layout and classes: 11 classes, raw value 11 (void) -> ignore.
SegFolderOptions camvid_options(const std::string& root, const std::string& split);

}  // namespace detseg

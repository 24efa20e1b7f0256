// Implements: reading an Ultralytics YOLO data set (data.yaml + images/<split>/ + labels/<split>/*.txt,
// one "class cx cy w h" line per box, normalised to the image, or "class x1 y1 x2 y2 ..." for a
// polygon) into a CocoDataset, so training, evaluation and `detseg convert yolo` read it like COCO.
// Category ids are class + 1 (COCO keeps 0 free); names come from data.yaml's `names`.
#pragma once

#include <string>

#include "detseg/data/readers/coco.h"

namespace detseg {

struct YoloOptions {
  std::string split = "train";  // the data.yaml key naming the images: train, val or test
};

struct YoloDataset {
  CocoDataset coco;       // file_name is relative to image_root
  std::string image_root;  // data.yaml's `path` (or its folder)
};

// Reads `data_yaml`. The split's images are a folder (searched recursively), a .txt list of image
// paths, or a list of either; each image's labels are the .txt at the same place under labels/
// instead of images/ (none: no boxes). Throws Error naming the file and line of a bad label.
YoloDataset read_yolo(const std::string& data_yaml, const YoloOptions& options = {});

}  // namespace detseg

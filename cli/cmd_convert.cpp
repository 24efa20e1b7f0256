// Implements: `detseg convert voc VOC_DIR -o OUT.json [--split S] [--label-map L]` and `detseg convert
// yolo DATA.yaml -o OUT.json [--split S]`: read a Pascal VOC folder or an Ultralytics YOLO data set
// and write a COCO instances JSON (atomically: nothing is written on error).
#include <iostream>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/label_map.h"
#include "detseg/data/readers/voc.h"
#include "detseg/data/readers/yolo.h"

namespace detseg::cli {

int run_convert_voc(const ConvertVocArgs& args) {
  DETSEG_CONFIG_CHECK(!args.voc_dir.empty(), "convert voc: VOC_DIR is required");
  DETSEG_CONFIG_CHECK(!args.output.empty(), "convert voc: -o OUT.json is required");
  DETSEG_CHECK(is_directory(args.voc_dir), args.voc_dir, ": not a directory");
  VocOptions options;
  options.split = args.split;
  if (!args.label_map.empty()) options.label_map = read_label_map(args.label_map);
  const CocoDataset dataset = read_voc(args.voc_dir, options);
  write_coco(dataset, args.output);
  int64_t difficult = 0;
  for (const auto& a : dataset.annotations) difficult += a.ignore ? 1 : 0;
  std::cout << "wrote " << args.output << ": " << dataset.images.size() << " images, " << dataset.annotations.size()
            << " boxes (" << difficult << " difficult), " << dataset.categories.size() << " categories\n";
  return 0;
}

int run_convert_yolo(const ConvertYoloArgs& args) {
  YoloOptions options;
  options.split = args.split;
  const YoloDataset read = read_yolo(args.data_yaml, options);
  // file_name relative to the data set root: the COCO file's `images` folder is that root.
  write_coco(read.coco, args.output);
  int64_t polygons = 0;
  for (const auto& a : read.coco.annotations) polygons += a.segmentation.kind == CocoSegmentation::kPolygons ? 1 : 0;
  std::cout << "wrote " << args.output << ": " << read.coco.images.size() << " images, " << read.coco.annotations.size()
            << " boxes (" << polygons << " with polygons), " << read.coco.categories.size()
            << " categories; image file names are relative to " << read.image_root << "\n";
  return 0;
}

}  // namespace detseg::cli

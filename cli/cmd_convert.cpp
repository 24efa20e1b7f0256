// Implements: `detseg convert voc VOC_DIR -o OUT.json [--split S] [--label-map L]` and `detseg convert
// yolo DATA.yaml -o OUT.json [--split S]`: read a Pascal VOC folder or an Ultralytics YOLO data set
// and write a COCO instances JSON (atomically: nothing is written on error).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/label_map.h"
#include "detseg/data/readers/voc.h"
#include "detseg/data/readers/yolo.h"

namespace detseg::cli {
namespace {

// -o is a file that none of the conversion reads: not a folder, not the label map or data.yaml, and
// not an annotation, list or image file inside the data set's folder.
void check_convert_output(const std::string& output, const std::string& dataset_dir, const std::string& dataset,
                          const std::vector<CommandInput>& inputs) {
  namespace fs = std::filesystem;
  DETSEG_CONFIG_CHECK(!is_directory(output), "-o ", output, ": is a folder; give a file path (e.g. ",
                      (fs::path(output) / "instances.json").string(), ")");
  check_output_is_not_an_input(output, "-o", inputs);
  std::error_code error;
  if (!fs::exists(output, error)) return;
  std::string ext = fs::path(output).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  static const std::vector<std::string> read = {".xml", ".txt", ".yaml", ".yml", ".jpg", ".jpeg", ".png", ".bmp"};
  if (std::find(read.begin(), read.end(), ext) == read.end()) return;
  const std::string root = fs::canonical(dataset_dir, error).string();
  const std::string file = fs::canonical(output, error).string();
  DETSEG_CONFIG_CHECK(error || root.empty() || file.rfind(root + "/", 0) != 0, "-o ", output, ": is a file of ",
                      dataset, " (its annotations, lists and images are what the conversion reads); choose another path");
}

}  // namespace

int run_convert_voc(const ConvertVocArgs& args) {
  DETSEG_CONFIG_CHECK(!args.voc_dir.empty(), "convert voc: VOC_DIR is required");
  DETSEG_CONFIG_CHECK(!args.output.empty(), "convert voc: -o OUT.json is required");
  DETSEG_CHECK(is_directory(args.voc_dir), args.voc_dir, ": not a directory");
  check_convert_output(args.output, args.voc_dir, "the VOC folder " + args.voc_dir,
                       {{args.label_map, "the label map given by --label-map"}});
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
  check_convert_output(args.output, read.image_root, "the YOLO data set " + read.image_root,
                       {{args.data_yaml, "the data set's data.yaml"}});
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

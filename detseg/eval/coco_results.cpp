// Implements: the COCO results writer (see coco_results.h).
#include "detseg/eval/coco_results.h"

#include "detseg/core/files.h"
#include "detseg/data/readers/rle.h"

namespace detseg {

std::string coco_results_json(const std::vector<CocoAnnotation>& detections) {
  std::string out;
  out.reserve(detections.size() * 96 + 4);
  out += "[";
  for (size_t i = 0; i < detections.size(); ++i) {
    const CocoAnnotation& d = detections[i];
    out += i ? ",\n {" : "\n {";
    append_ids_and_box_json(out, d);
    out += ", \"score\": ";
    append_json_number(out, d.score);
    if (d.segmentation.kind == CocoSegmentation::kRle) {
      // Results carry compressed RLE, as pycocotools' encode() gives it.
      out += ", \"segmentation\": {\"size\": [";
      append_json_number(out, static_cast<double>(d.segmentation.rle.height));
      out += ", ";
      append_json_number(out, static_cast<double>(d.segmentation.rle.width));
      out += "], \"counts\": ";
      append_json_string(out, rle_to_string(d.segmentation.rle));
      out += "}";
    } else {
      append_segmentation_json(out, d.segmentation);
    }
    out += "}";
  }
  out += "\n]\n";
  return out;
}

void write_coco_results(const std::vector<CocoAnnotation>& detections, const std::string& path) {
  write_file_atomic(path, coco_results_json(detections));
}

}  // namespace detseg

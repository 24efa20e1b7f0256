// Implements: listing image + label-map pairs of a segmentation folder.
#include "detseg/data/readers/seg_folder.h"

#include <algorithm>
#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace fs = std::filesystem;

SegFolder read_seg_folder(const SegFolderOptions& options) {
  DETSEG_CHECK(is_directory(options.image_dir), options.image_dir, ": image folder not found");
  DETSEG_CHECK(is_directory(options.label_dir), options.label_dir, ": label folder not found");
  for (int v : options.void_values)
    DETSEG_CHECK(v >= 0 && v <= 255, "segmentation void value must be in 0..255, got ", v);
  SegFolder out;
  out.options = options;
  std::vector<fs::path> images;
  for (const auto& e : fs::directory_iterator(options.image_dir)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    if (e.is_regular_file() && (ext == ".png" || ext == ".jpg" || ext == ".jpeg")) images.push_back(e.path());
  }
  std::sort(images.begin(), images.end());
  DETSEG_CHECK(!images.empty(), options.image_dir, ": no images (.png/.jpg) found");
  for (const auto& image : images) {
    const fs::path label = fs::path(options.label_dir) / (image.stem().string() + ".png");
    DETSEG_CHECK(file_exists(label.string()), image.string(), ": no label map ", label.string());
    out.samples.push_back({image.string(), label.string()});
  }
  return out;
}

SegFolderOptions camvid_options(const std::string& root, const std::string& split) {
  SegFolderOptions o;
  o.image_dir = (fs::path(root) / split).string();
  o.label_dir = (fs::path(root) / (split + "annot")).string();
  o.num_classes = 11;
  o.void_values = {11};
  return o;
}

}  // namespace detseg

// Implements: the torch-free helpers of the data tests (shared data paths, temp folders, error
// messages, a YOLO copy of BCCD), apart from data_test_util.h so the reader tests also build
// without LibTorch (fuzz/).
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/readers/voc.h"
#include "error_of.h"
#include "test_paths.h"

namespace detseg::datatest {

inline std::string shared_data(const std::string& rel) { return std::string(DETSEG_SHARED_DIR) + "/data/" + rel; }

// A fresh, empty temp folder for one test.
inline std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("detseg_data_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

using detseg::testing::error_of;

// An Ultralytics-layout YOLO data set made from BCCD's first `count` test images: images/val/*.jpg,
// labels/val/*.txt with normalised "class cx cy w h" lines, data.yaml. Class k is VOC's k-th name.
inline std::string bccd_as_yolo(const std::string& name, size_t count) {
  const std::string dir = temp_dir(name);
  VocOptions voc;
  voc.split = "test";
  const CocoDataset d = read_voc(shared_data("bccd/BCCD"), voc);
  namespace fs = std::filesystem;
  fs::create_directories(dir + "/images/val");
  fs::create_directories(dir + "/labels/val");
  for (size_t i = 0; i < count; ++i) {
    const CocoImage& im = d.images[i];
    fs::copy_file(shared_data("bccd/BCCD/JPEGImages/" + im.file_name), dir + "/images/val/" + im.file_name);
    std::string lines;
    for (const auto& a : d.annotations) {
      if (a.image_id != im.id) continue;
      char line[160];
      std::snprintf(line, sizeof(line), "%lld %.8f %.8f %.8f %.8f\n", static_cast<long long>(a.category_id - 1),
                    (a.bbox[0] + a.bbox[2] / 2) / static_cast<double>(im.width),
                    (a.bbox[1] + a.bbox[3] / 2) / static_cast<double>(im.height), a.bbox[2] / static_cast<double>(im.width),
                    a.bbox[3] / static_cast<double>(im.height));
      lines += line;
    }
    write_file_atomic(dir + "/labels/val/" + fs::path(im.file_name).stem().string() + ".txt", lines);
  }
  std::string names;
  for (const auto& c : d.categories) names += (names.empty() ? "" : ", ") + c.name;
  write_file_atomic(dir + "/data.yaml", "path: .\ntrain: images/val\nval: images/val\nnames: [" + names + "]\n");
  return dir;
}

}  // namespace detseg::datatest

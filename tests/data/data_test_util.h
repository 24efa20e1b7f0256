// Implements: small helpers shared by the data tests (temp folders, synthetic examples).
#pragma once

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/data/example.h"
#include "detseg/data/readers/voc.h"

namespace detseg::datatest {

inline std::string shared_data(const std::string& rel) { return std::string(DETSEG_SHARED_DIR) + "/data/" + rel; }

// A fresh, empty temp folder for one test.
inline std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("detseg_data_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// An h x w example whose pixel (c, y, x) = (x + 3y + 50c) % 256, with the given xyxy boxes.
inline Example synthetic_example(int64_t h, int64_t w, const std::vector<std::vector<float>>& boxes = {}) {
  Example ex;
  auto xs = at::arange(w, at::kLong).view({1, 1, w});
  auto ys = at::arange(h, at::kLong).view({1, h, 1});
  auto cs = at::arange(3, at::kLong).view({3, 1, 1});
  ex.image = ((xs + ys * 3 + cs * 50) % 256).to(at::kByte).contiguous();
  ex.original_height = h;
  ex.original_width = w;
  const int64_t n = static_cast<int64_t>(boxes.size());
  ex.boxes = at::zeros({n, 4}, at::kFloat);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 4; ++k) ex.boxes[i][k] = boxes[static_cast<size_t>(i)][static_cast<size_t>(k)];
  ex.classes = at::arange(n, at::kLong);
  ex.iscrowd = at::zeros({n}, at::kBool);
  return ex;
}

// The message of the detseg::Error thrown by f, or "" when nothing is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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

#include "detseg/data/readers/yolo.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/yaml.h"
#include "detseg/data/readers/image_header.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// The images one `train:`/`val:` entry names: a folder (recursively) or a .txt list of paths.
void collect_images(const fs::path& root, const std::string& entry, const std::string& yaml, std::vector<fs::path>& out) {
  const fs::path p = fs::path(entry).is_relative() ? root / entry : fs::path(entry);
  if (fs::is_directory(p)) {
    std::vector<fs::path> found;
    for (const auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file() && is_image(e.path())) found.push_back(e.path());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
    return;
  }
  DETSEG_CHECK(fs::is_regular_file(p), yaml, ": ", entry, ": no such image folder or image list (", p.string(), ")");
  std::istringstream lines(read_file(p.string()));
  std::string line;
  while (std::getline(lines, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) continue;
    // Ultralytics lists paths relative to the data set root ("./images/train/a.jpg").
    out.push_back(fs::path(line).is_relative() ? (root / line).lexically_normal() : fs::path(line));
  }
}

// Ultralytics' img2label_paths: the last "/images/" becomes "/labels/", the extension ".txt".
fs::path label_path(const fs::path& image) {
  std::string s = image.string();
  const size_t at = s.rfind("/images/");
  if (at != std::string::npos) s.replace(at, 8, "/labels/");
  return fs::path(s).replace_extension(".txt");
}

std::map<int64_t, std::string> read_names(const YAML::Node& names, const std::string& yaml) {
  std::map<int64_t, std::string> out;
  if (names.IsSequence()) {
    for (size_t i = 0; i < names.size(); ++i) out[static_cast<int64_t>(i)] = names[i].as<std::string>();
  } else if (names.IsMap()) {
    for (const auto& item : names) {
      int64_t id = -1;
      try {
        id = item.first.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
      DETSEG_CHECK(id >= 0, location(yaml, item.first.Mark().line + 1), "names: keys must be class indices 0, 1, ...");
      out[id] = item.second.as<std::string>();
    }
  } else {
    throw Error(yaml + ": names: expected a list of class names or a map {index: name}");
  }
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k)
    DETSEG_CHECK(out.count(k), yaml, ": names: class ", k, " is missing (indices must be 0..", out.size() - 1, ")");
  return out;
}

void read_labels(const fs::path& file, int64_t num_classes, const CocoImage& image, int64_t& next_id,
                 std::vector<CocoAnnotation>& out) {
  std::istringstream lines(read_file(file.string()));
  std::string line;
  long line_number = 0;
  const double w = static_cast<double>(image.width), h = static_cast<double>(image.height);
  while (std::getline(lines, line)) {
    ++line_number;
    std::istringstream fields(line);
    std::vector<double> v;
    std::string token;
    while (fields >> token) {
      char* end = nullptr;
      const double x = std::strtod(token.c_str(), &end);
      DETSEG_CHECK(*end == '\0' && std::isfinite(x), location(file.string(), line_number), "'", token, "' is not a number");
      v.push_back(x);
    }
    if (v.empty()) continue;
    DETSEG_CHECK(v.size() == 5 || (v.size() >= 7 && v.size() % 2 == 1), location(file.string(), line_number),
                 "expected 'class cx cy w h' or a polygon 'class x1 y1 x2 y2 x3 y3 ...', got ", v.size(), " numbers");
    DETSEG_CHECK(v[0] == std::floor(v[0]) && v[0] >= 0 && v[0] < static_cast<double>(num_classes),
                 location(file.string(), line_number), "class ", v[0], " is not in data.yaml's names (0..",
                 num_classes - 1, ")");
    for (size_t k = 1; k < v.size(); ++k)
      DETSEG_CHECK(v[k] >= 0 && v[k] <= 1.0 + 1e-6, location(file.string(), line_number), "coordinate ", v[k],
                   " is not normalised to [0, 1] (YOLO labels are fractions of the image size)");
    CocoAnnotation a;
    a.id = next_id++;
    a.image_id = image.id;
    a.category_id = static_cast<int64_t>(v[0]) + 1;
    if (v.size() == 5) {
      a.bbox[0] = (v[1] - v[3] / 2) * w;
      a.bbox[1] = (v[2] - v[4] / 2) * h;
      a.bbox[2] = v[3] * w;
      a.bbox[3] = v[4] * h;
    } else {
      std::vector<double> xy;
      double x0 = w, y0 = h, x1 = 0, y1 = 0;
      for (size_t k = 1; k + 1 < v.size(); k += 2) {
        xy.push_back(v[k] * w);
        xy.push_back(v[k + 1] * h);
        x0 = std::min(x0, xy[xy.size() - 2]), x1 = std::max(x1, xy[xy.size() - 2]);
        y0 = std::min(y0, xy.back()), y1 = std::max(y1, xy.back());
      }
      a.bbox[0] = x0, a.bbox[1] = y0, a.bbox[2] = x1 - x0, a.bbox[3] = y1 - y0;
      a.segmentation.kind = CocoSegmentation::kPolygons;
      a.segmentation.polygons.push_back(std::move(xy));
    }
    a.area = a.bbox[2] * a.bbox[3];
    out.push_back(std::move(a));
  }
}

}  // namespace

YoloDataset read_yolo(const std::string& data_yaml, const YoloOptions& options) {
  DETSEG_CHECK(file_exists(data_yaml) && !is_directory(data_yaml), data_yaml,
               ": not found (expected a YOLO data.yaml with path, train/val and names)");
  const std::string text = read_yaml_file(data_yaml, YamlErrorKind::kData);
  check_yaml_node_count(text, data_yaml, YamlErrorKind::kData);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(location(data_yaml, e.mark.line + 1, e.mark.column + 1) + "malformed YAML: " + e.msg);
  }
  check_yaml_expansion(root, data_yaml, YamlErrorKind::kData);  // names and splits are walked below
  DETSEG_CHECK(root.IsMap(), data_yaml, ": expected a mapping with path, train/val and names");
  const fs::path yaml_dir = fs::path(data_yaml).parent_path();
  fs::path image_root = yaml_dir;
  if (root["path"] && root["path"].IsScalar() && !root["path"].Scalar().empty()) {
    const fs::path p = root["path"].Scalar();
    image_root = p.is_relative() ? yaml_dir / p : p;
  }
  image_root = image_root.lexically_normal();
  if (!image_root.has_filename() && image_root.has_parent_path()) image_root = image_root.parent_path();  // "a/b/."
  DETSEG_CHECK(root["names"], data_yaml, ": names: missing (the class names, in class-index order)");
  const std::map<int64_t, std::string> names = read_names(root["names"], data_yaml);
  if (root["nc"])
    DETSEG_CHECK(root["nc"].as<int64_t>() == static_cast<int64_t>(names.size()), data_yaml, ": nc is ",
                 root["nc"].as<int64_t>(), " but names lists ", names.size(), " classes");
  const YAML::Node split = root[options.split];
  DETSEG_CHECK(split && !split.IsNull(), data_yaml, ": ", options.split, ": missing (the split's images)");
  std::vector<fs::path> images;
  if (split.IsSequence())
    for (const auto& entry : split) collect_images(image_root, entry.as<std::string>(), data_yaml, images);
  else
    collect_images(image_root, split.as<std::string>(), data_yaml, images);
  DETSEG_CHECK(!images.empty(), data_yaml, ": ", options.split, ": no images found");

  YoloDataset out;
  out.image_root = image_root.string();
  out.coco.source = data_yaml;
  for (const auto& [index, name] : names) out.coco.categories.push_back({index + 1, name, ""});
  int64_t next_id = 1;
  for (size_t i = 0; i < images.size(); ++i) {
    CocoImage image;
    image.id = static_cast<int64_t>(i) + 1;
    image.file_name = images[i].lexically_relative(image_root).string();
    if (image.file_name.empty() || image.file_name.rfind("..", 0) == 0) image.file_name = images[i].string();
    // Labels are fractions of the image size: the header says it without decoding the image.
    std::ifstream in(images[i], std::ios::binary);
    std::string head(1 << 16, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    bool sized = image_header_size(head, image.width, image.height);
    if (!sized && head.size() == (1u << 16)) sized = image_header_size(read_file(images[i].string()), image.width, image.height);
    DETSEG_CHECK(sized && image.width > 0 && image.height > 0,
                 images[i].string(), ": cannot read the image size from its header (JPEG, PNG or BMP expected)");
    // Ultralytics labels the upright image (its exif_size), and so does detseg's decoder.
    if (exif_orientation(head) >= 5) std::swap(image.width, image.height);
    out.coco.images.push_back(image);
    const fs::path labels = label_path(images[i]);
    if (fs::exists(labels)) read_labels(labels, static_cast<int64_t>(names.size()), image, next_id, out.coco.annotations);
  }
  out.coco.index();
  return out;
}

}  // namespace detseg

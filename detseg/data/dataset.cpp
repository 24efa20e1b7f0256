// Implements: DetectionDataset (COCO form -> checked per-image targets -> Examples) and
// SegmentationDataset (image + class-index PNG -> Examples), plus mask rasterization.
#include "detseg/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/log.h"
#include "detseg/data/image_io.h"
#include "detseg/data/readers/rle.h"

namespace detseg {
namespace fs = std::filesystem;

BoxPolicy parse_box_policy(const std::string& name) {
  if (name == "clip") return BoxPolicy::kClip;
  if (name == "drop") return BoxPolicy::kDrop;
  throw ConfigError(str("invalid box policy '", name, "': expected clip or drop"));
}

BadImagePolicy parse_bad_image_policy(const std::string& name) {
  if (name == "stop") return BadImagePolicy::kStop;
  if (name == "skip") return BadImagePolicy::kSkip;
  throw ConfigError(str("invalid bad_images policy '", name, "': expected stop or skip"));
}

void SkippedImages::add(const std::string& file, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(files_.begin(), files_.end(), file) != files_.end()) return;
    files_.push_back(file);
  }
  log_warn_once("skipped " + file, str(reason, "; left out (bad_images: skip)"));
}

std::vector<std::string> SkippedImages::files() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return files_;
}

SkippedImages::~SkippedImages() {
  if (files_.empty()) return;
  try {
    std::string list;
    for (const std::string& f : files_) list += (list.empty() ? "" : ", ") + f;
    log_warn(source_, ": ", files_.size(), files_.size() == 1 ? " image was" : " images were",
             " left out (bad_images: skip): ", list);
  } catch (...) {  // a destructor must not throw; the warnings at each skip said it already
  }
}

std::string image_size_mismatch(const std::string& path, int64_t width, int64_t height, int orientation,
                                int64_t annotated_width, int64_t annotated_height, const std::string& source) {
  if (width == annotated_width && height == annotated_height) return "";
  if (orientation >= 5 && annotated_width == height && annotated_height == width)
    return str(path, ": ", orientation_note(orientation, width, height), " but the annotation says ", annotated_width,
               "x", annotated_height, ": ", source,
               " was made on the image as stored, and detseg turns images upright first, as PIL's exif_transpose "
               "does (annotate the upright image, or remove the file's orientation tag)");
  if (orientation != 1)
    return str(path, ": ", orientation_note(orientation, width, height), " but the annotations (", source, ") say ",
               annotated_width, "x", annotated_height);
  return str(path, ": image is ", width, "x", height, " but the annotations (", source, ") say ", annotated_width, "x",
             annotated_height);
}

at::Tensor segmentation_to_mask(const CocoSegmentation& seg, int64_t height, int64_t width) {
  at::Tensor mask = at::zeros({height, width}, at::kByte);  // [H, W]
  if (seg.kind == CocoSegmentation::kNone) return mask;
  if (seg.kind == CocoSegmentation::kRle)
    DETSEG_CHECK(seg.rle.height == height && seg.rle.width == width, "RLE mask is ", seg.rle.height, "x",
                 seg.rle.width, " but its image is ", height, "x", width);
  // The eval area's mask API rasterizes exactly as pycocotools does, so training masks equal the
  // masks the evaluator scores against.
  rle_decode_row_major(segmentation_to_rle(seg, height, width), mask.data_ptr<uint8_t>());
  return mask;
}

DetectionDataset::DetectionDataset(CocoDataset coco, DetectionDatasetOptions options)
    : coco_(std::move(coco)), options_(std::move(options)), skipped_(std::make_shared<SkippedImages>(coco_.source)) {
  const std::string& src = coco_.source;
  DETSEG_CHECK(!coco_.images.empty(), src, ": empty dataset (no images)");
  DETSEG_CHECK(!coco_.categories.empty(), src, ": dataset defines no categories");
  // Our own checks first, so the messages say which annotation is wrong.
  std::unordered_map<int64_t, int64_t> image_pos, category_pos;
  for (size_t i = 0; i < coco_.images.size(); ++i) {
    const CocoImage& im = coco_.images[i];
    DETSEG_CHECK(im.width > 0 && im.height > 0, src, ": image id ", im.id, " (", im.file_name,
                 ") has non-positive size ", im.width, "x", im.height);
    image_pos.emplace(im.id, static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < coco_.categories.size(); ++i) category_pos.emplace(coco_.categories[i].id, static_cast<int64_t>(i));
  assign_labels();
  for (size_t i = 0; i < coco_.annotations.size(); ++i) {
    const CocoAnnotation& a = coco_.annotations[i];
    DETSEG_CHECK(image_pos.count(a.image_id), src, ": annotations[", i, "] (id ", a.id, ") points at unknown image id ",
                 a.image_id);
    DETSEG_CHECK(category_pos.count(a.category_id), src, ": annotations[", i, "] (id ", a.id,
                 ") has unknown category id ", a.category_id);
  }
  coco_.index();

  std::vector<std::vector<int64_t>> by_image(coco_.images.size());
  for (size_t i = 0; i < coco_.annotations.size(); ++i)
    by_image[static_cast<size_t>(image_pos[coco_.annotations[i].image_id])].push_back(static_cast<int64_t>(i));

  for (size_t im = 0; im < coco_.images.size(); ++im) {
    const double w = static_cast<double>(coco_.images[im].width), h = static_cast<double>(coco_.images[im].height);
    Record r;
    r.image = static_cast<int64_t>(im);
    std::vector<float> boxes;
    std::vector<int64_t> classes;
    std::vector<uint8_t> crowd;
    for (int64_t ai : by_image[im]) {
      const CocoAnnotation& a = coco_.annotations[static_cast<size_t>(ai)];
      ++stats_.total;
      if ((options_.skip_crowd && a.iscrowd) || (options_.skip_ignored && a.ignore)) {
        ++stats_.dropped_filtered;
        continue;
      }
      double x1 = a.bbox[0], y1 = a.bbox[1], x2 = a.bbox[0] + a.bbox[2], y2 = a.bbox[1] + a.bbox[3];
      if (!(std::isfinite(x1) && std::isfinite(y1) && std::isfinite(x2) && std::isfinite(y2)) || x2 <= x1 || y2 <= y1) {
        ++stats_.dropped_degenerate;
        continue;
      }
      const bool outside = x1 < 0 || y1 < 0 || x2 > w || y2 > h;
      if (outside && options_.invalid_boxes == BoxPolicy::kDrop) {
        ++stats_.dropped_outside;
        continue;
      }
      if (outside) {
        x1 = std::clamp(x1, 0.0, w);
        x2 = std::clamp(x2, 0.0, w);
        y1 = std::clamp(y1, 0.0, h);
        y2 = std::clamp(y2, 0.0, h);
        if (x2 <= x1 || y2 <= y1) {  // entirely outside: nothing left after clipping
          ++stats_.dropped_degenerate;
          continue;
        }
        ++stats_.clipped;
      }
      boxes.insert(boxes.end(), {static_cast<float>(x1), static_cast<float>(y1), static_cast<float>(x2), static_cast<float>(y2)});
      classes.push_back(category_labels_.at(a.category_id));
      crowd.push_back(a.iscrowd ? 1 : 0);
      r.annotations.push_back(ai);
    }
    stats_.kept += static_cast<int64_t>(classes.size());
    if (options_.skip_empty_images && classes.empty()) continue;
    const int64_t n = static_cast<int64_t>(classes.size());
    r.boxes = at::from_blob(boxes.data(), {n, 4}, at::kFloat).clone();
    r.classes = at::from_blob(classes.data(), {n}, at::kLong).clone();
    r.iscrowd = at::from_blob(crowd.data(), {n}, at::kByte).to(at::kBool);
    records_.push_back(std::move(r));
  }
  DETSEG_CHECK(!records_.empty(), src, ": empty dataset (no image has a usable annotation)");
  const int64_t problems = stats_.clipped + stats_.dropped_outside + stats_.dropped_degenerate;
  if (problems > 0)
    log_warn(src, ": ", stats_.clipped, " boxes clipped to their image, ", stats_.dropped_outside,
             " dropped outside the image, ", stats_.dropped_degenerate, " dropped with zero/negative size (of ",
             stats_.total, ")");
}

Example DetectionDataset::get(int64_t index) const {
  DETSEG_CHECK(index >= 0 && index < size(), "dataset index ", index, " out of range [0, ", size(), ")");
  const Record& r = records_[static_cast<size_t>(index)];
  const CocoImage& im = coco_.images[static_cast<size_t>(r.image)];
  const std::string path = (fs::path(options_.image_dir) / im.file_name).string();
  Example ex;
  int orientation = 1;
  try {
    ex.image = read_image(path, &orientation);
  } catch (const Error& e) {
    if (options_.bad_images == BadImagePolicy::kStop) throw;
    skipped_->add(path, e.what());
    return Example();  // no image: left out
  }
  ex.original_height = ex.height();
  ex.original_width = ex.width();
  if (options_.check_image_size) {
    const std::string mismatch =
        image_size_mismatch(path, ex.width(), ex.height(), orientation, im.width, im.height, coco_.source);
    DETSEG_CHECK(mismatch.empty(), mismatch);
  }
  ex.image_id = im.id;
  ex.boxes = r.boxes.clone();  // transforms modify in place
  ex.classes = r.classes;
  ex.iscrowd = r.iscrowd;
  if (options_.with_masks) {
    const int64_t n = static_cast<int64_t>(r.annotations.size());
    ex.masks = at::zeros({n, ex.height(), ex.width()}, at::kByte);  // [N, H, W]
    for (int64_t i = 0; i < n; ++i) {
      const CocoAnnotation& a = coco_.annotations[static_cast<size_t>(r.annotations[static_cast<size_t>(i)])];
      ex.masks[i].copy_(segmentation_to_mask(a.segmentation, ex.height(), ex.width()));
    }
  }
  return ex;
}

int64_t DetectionDataset::label_to_category_id(int64_t label) const {
  DETSEG_CHECK(label >= 0 && label < num_classes(), "label ", label, " out of range [0, ", num_classes(), ")");
  return label_category_ids_[static_cast<size_t>(label)];
}

int64_t DetectionDataset::category_id_to_label(int64_t category_id) const {
  auto it = category_labels_.find(category_id);
  return it == category_labels_.end() ? -1 : it->second;
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

void DetectionDataset::assign_labels() {
  const std::string& src = coco_.source;
  std::unordered_map<std::string, int64_t> by_name;  // category name -> its id
  std::vector<std::string> file_names;
  for (const CocoCategory& c : coco_.categories) {
    DETSEG_CHECK(!c.name.empty(), src, ": category id ", c.id, " has an empty name");
    DETSEG_CHECK(by_name.emplace(c.name, c.id).second, src, ": two categories are named '", c.name,
                 "' (ids ", by_name[c.name], " and ", c.id, "): class names must be unique");
    file_names.push_back(c.name);
  }
  class_names_ = options_.class_order.empty() ? file_names : options_.class_order;
  std::unordered_map<std::string, int64_t> label_of;
  for (size_t k = 0; k < class_names_.size(); ++k) {
    DETSEG_CHECK(!class_names_[k].empty(), src, ": the model's class ", k, " has an empty name");
    DETSEG_CHECK(label_of.emplace(class_names_[k], static_cast<int64_t>(k)).second, src, ": the model names class '",
                 class_names_[k], "' twice");
  }
  std::vector<std::string> unknown;
  for (const CocoCategory& c : coco_.categories)
    if (!label_of.count(c.name)) unknown.push_back(c.name);
  if (!unknown.empty())
    throw ConfigError(str(src, ": categories ", quoted_names(unknown), " are not among the model's classes ",
                          quoted_names(class_names_), " (the data set has ", quoted_names(file_names),
                          "); classes are matched by name"));
  label_category_ids_.assign(class_names_.size(), -1);
  for (const CocoCategory& c : coco_.categories) {
    const int64_t label = label_of.at(c.name);
    label_category_ids_[static_cast<size_t>(label)] = c.id;
    category_labels_[c.id] = label;
  }
}

SegmentationDataset::SegmentationDataset(SegFolder folder, BadImagePolicy bad_images)
    : folder_(std::move(folder)),
      values_(folder_.options.num_classes, folder_.options.void_values),
      bad_images_(bad_images),
      skipped_(std::make_shared<SkippedImages>(folder_.options.image_dir)) {
  DETSEG_CHECK(!folder_.samples.empty(), folder_.options.image_dir, ": empty segmentation dataset");
}

Example SegmentationDataset::get(int64_t index) const {
  DETSEG_CHECK(index >= 0 && index < size(), "dataset index ", index, " out of range [0, ", size(), ")");
  const SegSample& s = folder_.samples[static_cast<size_t>(index)];
  Example ex;
  int orientation = 1;
  try {
    ex.image = read_image(s.image_path, &orientation);
  } catch (const Error& e) {
    if (bad_images_ == BadImagePolicy::kStop) throw;
    skipped_->add(s.image_path, e.what());
    return Example();  // no image: left out
  }
  ex.original_height = ex.height();
  ex.original_width = ex.width();
  ex.image_id = index;
  at::Tensor label = read_label_png(s.label_path);  // [H, W] uint8, upright as its image
  DETSEG_CHECK(label.size(0) == ex.height() && label.size(1) == ex.width(), s.label_path, ": label map is ",
               label.size(1), "x", label.size(0), " but its image ", s.image_path, " is ", ex.width(), "x", ex.height(),
               orientation == 1 ? "" : " (after its EXIF orientation " + std::to_string(orientation) + ")");
  values_.apply(label.data_ptr<uint8_t>(), label.size(0), label.size(1), s.label_path);
  ex.label_map = label;
  ex.boxes = at::zeros({0, 4}, at::kFloat);
  ex.classes = at::zeros({0}, at::kLong);
  ex.iscrowd = at::zeros({0}, at::kBool);
  return ex;
}

}  // namespace detseg

// Implements: reading and writing COCO instances JSON and COCO results JSON (simdjson DOM), with
// errors that name the file and the field path, e.g. "gt.json: annotations[12].bbox: expected 4
// numbers".
#include "detseg/data/readers/coco.h"

#include <charconv>
#include <cmath>
#include <unordered_set>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"
#include "detseg/data/readers/rle.h"

namespace detseg {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Names the place being read ("annotations[12].bbox") only when an error is thrown, so reading
// stays allocation-free on the good path.
struct FieldPath {
  const std::string& file;
  const char* array;  // "annotations", or "" for a top-level list
  size_t index;
  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    throw Error(str(file, ": ", array, "[", index, "]", field.empty() ? "" : ".", field, ": ", what));
  }
};

const char* type_name(element_type type) {
  switch (type) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "something else";
}

bool as_number(element value, double& out) {
  switch (value.type()) {
    case element_type::INT64: out = static_cast<double>(int64_t(value)); return true;
    case element_type::UINT64: out = static_cast<double>(uint64_t(value)); return true;
    case element_type::DOUBLE: out = double(value); return true;
    default: return false;
  }
}

double get_number(element value, const FieldPath& at, std::string_view field) {
  double out = 0;
  if (!as_number(value, out)) at.fail(field, str("expected a number, got ", type_name(value.type())));
  return out;
}

int64_t get_integer(element value, const FieldPath& at, std::string_view field) {
  switch (value.type()) {
    case element_type::INT64: return int64_t(value);
    case element_type::UINT64: {
      // Above int64: the cast would wrap it to a negative id.
      const uint64_t u = uint64_t(value);
      if (u > static_cast<uint64_t>(INT64_MAX)) at.fail(field, str("integer ", u, " is out of range"));
      return static_cast<int64_t>(u);
    }
    case element_type::DOUBLE: {
      double d = double(value);
      if (std::floor(d) == d && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
      at.fail(field, str("expected an integer, got ", d));
    }
    default: at.fail(field, str("expected an integer, got ", type_name(value.type())));
  }
}

bool get_flag(element value, const FieldPath& at, std::string_view field) {
  if (value.type() == element_type::BOOL) return bool(value);
  return get_integer(value, at, field) != 0;
}

std::string get_string(element value, const FieldPath& at, std::string_view field) {
  if (value.type() != element_type::STRING)
    at.fail(field, str("expected a string, got ", type_name(value.type())));
  return std::string(std::string_view(value));
}

void get_box(element value, const FieldPath& at, double* box) {
  if (value.type() != element_type::ARRAY) at.fail("bbox", "expected 4 numbers");
  size_t n = 0;
  for (element v : simdjson::dom::array(value)) {
    if (n == 4 || !as_number(v, box[n])) at.fail("bbox", "expected 4 numbers");
    ++n;
  }
  if (n != 4) at.fail("bbox", "expected 4 numbers");
  if (box[2] < 0 || box[3] < 0)
    at.fail("bbox", str("negative size ", box[2], "x", box[3], " (bbox is [x, y, width, height])"));
}

void get_segmentation(element value, const FieldPath& at, CocoSegmentation& out) {
  if (value.type() == element_type::ARRAY) {
    for (element poly : simdjson::dom::array(value)) {
      if (poly.type() != element_type::ARRAY)
        at.fail("segmentation", "expected a list of polygons (lists of x,y numbers)");
      std::vector<double> xy;
      xy.reserve(simdjson::dom::array(poly).size());
      for (element v : simdjson::dom::array(poly)) {
        double d = 0;
        if (!as_number(v, d)) at.fail("segmentation", "polygon coordinates must be numbers");
        xy.push_back(d);
      }
      if (xy.size() % 2 != 0 || xy.size() < 4)
        at.fail("segmentation", str("a polygon needs an even number (>= 6) of coordinates, got ", xy.size()));
      out.polygons.push_back(std::move(xy));
    }
    out.kind = out.polygons.empty() ? CocoSegmentation::kNone : CocoSegmentation::kPolygons;
    return;
  }
  if (value.type() != element_type::OBJECT)
    at.fail("segmentation", str("expected polygons or an RLE object, got ", type_name(value.type())));
  element size, counts;
  if (value["size"].get(size) || size.type() != element_type::ARRAY ||
      simdjson::dom::array(size).size() != 2)
    at.fail("segmentation.size", "expected [height, width]");
  int64_t hw[2];
  size_t n = 0;
  for (element v : simdjson::dom::array(size)) hw[n++] = get_integer(v, at, "segmentation.size");
  if (hw[0] < 0 || hw[1] < 0) at.fail("segmentation.size", "negative size");
  if (value["counts"].get(counts)) at.fail("segmentation.counts", "missing");
  out.kind = CocoSegmentation::kRle;
  if (counts.type() == element_type::STRING) {
    try {
      out.rle = rle_from_string(std::string(std::string_view(counts)), hw[0], hw[1]);
    } catch (const Error& e) {
      at.fail("segmentation.counts", e.what());
    }
  } else if (counts.type() == element_type::ARRAY) {
    out.rle.height = hw[0];
    out.rle.width = hw[1];
    for (element v : simdjson::dom::array(counts)) {
      int64_t c = get_integer(v, at, "segmentation.counts");
      if (c < 0 || c > UINT32_MAX) at.fail("segmentation.counts", str("count ", c, " out of range"));
      out.rle.counts.push_back(static_cast<uint32_t>(c));
    }
  } else {
    at.fail("segmentation.counts", "expected a string or a list of integers");
  }
  uint64_t total = 0;
  for (uint32_t c : out.rle.counts) total += c;
  // Each side can be near 2^63, so the product is taken in 128 bits (it overflowed int64).
  const unsigned __int128 area = static_cast<unsigned __int128>(hw[0]) * static_cast<uint64_t>(hw[1]);
  if (total != area)
    at.fail("segmentation.counts", str("counts sum to ", total, ", not height*width = ",
                                       area <= UINT64_MAX ? str(static_cast<uint64_t>(area)) : str(hw[0], "*", hw[1])));
}

// The list under `key`, or an empty list when an optional key is absent. (A default-constructed
// dom::array has no tape behind it: iterating one crashes, so absent keys read an empty literal.)
simdjson::dom::array get_array(element root, const std::string& file, const char* key, bool required) {
  element value;
  if (root[key].get(value)) {
    DETSEG_CHECK(!required, file, ": missing \"", key, "\"");
    static simdjson::dom::parser empty_parser;
    static const simdjson::dom::array empty = empty_parser.parse(std::string_view("[]")).get_array().value();
    return empty;
  }
  DETSEG_CHECK(value.type() == element_type::ARRAY, file, ": \"", key, "\" must be a list, got ",
               type_name(value.type()));
  return simdjson::dom::array(value);
}

// Reads one annotation or detection object. Which fields must be present is the caller's check.
struct Seen {
  bool id = false, image_id = false, category_id = false, bbox = false, area = false, score = false,
       segmentation = false;
};

Seen read_annotation(element value, const FieldPath& at, CocoAnnotation& ann) {
  if (value.type() != element_type::OBJECT) at.fail("", str("expected an object, got ", type_name(value.type())));
  Seen seen;
  for (auto field : simdjson::dom::object(value)) {
    const std::string_view key = field.key;
    if (key == "id") {
      ann.id = get_integer(field.value, at, key);
      seen.id = true;
    } else if (key == "image_id") {
      ann.image_id = get_integer(field.value, at, key);
      seen.image_id = true;
    } else if (key == "category_id") {
      ann.category_id = get_integer(field.value, at, key);
      seen.category_id = true;
    } else if (key == "bbox") {
      // An empty bbox list means "no box" in results files (pycocotools checks bbox == []).
      if (field.value.type() == element_type::ARRAY && simdjson::dom::array(field.value).size() == 0) continue;
      get_box(field.value, at, ann.bbox);
      seen.bbox = true;
    } else if (key == "area") {
      ann.area = get_number(field.value, at, key);
      seen.area = true;
    } else if (key == "iscrowd") {
      ann.iscrowd = get_flag(field.value, at, key);
    } else if (key == "ignore") {
      ann.ignore = get_flag(field.value, at, key);
    } else if (key == "truncated") {
      ann.truncated = get_flag(field.value, at, key);
    } else if (key == "score") {
      ann.score = get_number(field.value, at, key);
      if (std::isnan(ann.score)) at.fail(key, "score is NaN");
      seen.score = true;
    } else if (key == "segmentation") {
      get_segmentation(field.value, at, ann.segmentation);
      seen.segmentation = ann.segmentation.kind != CocoSegmentation::kNone;
    }
  }
  return seen;
}

// Polygons are checked against their image when the file is read, so a hostile coordinate is
// reported with its file and field instead of surfacing (or exhausting memory) during evaluation.
void check_polygons(const CocoSegmentation& segmentation, const CocoImage& image, const FieldPath& at) {
  if (segmentation.kind != CocoSegmentation::kPolygons) return;
  for (const auto& xy : segmentation.polygons) {
    const std::string problem = polygon_problem(xy.data(), xy.size() / 2, image.height, image.width);
    if (!problem.empty()) at.fail("segmentation", problem);
  }
}
void append_number(std::string& out, double v) {
  char buffer[32];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    auto r = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(v));
    out.append(buffer, r.ptr);
    return;
  }
  DETSEG_CHECK(std::isfinite(v), "cannot write ", v, " to JSON");
  // The shortest form that reads back exactly; from 1e15 on always with an exponent: the plain
  // shortest form may spell a whole number in digits ("3333333333333333508096"), which JSON
  // readers take as an integer too large for 64 bits and refuse.
  auto r = std::fabs(v) >= 1e15 ? std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::scientific)
                                : std::to_chars(buffer, buffer + sizeof(buffer), v);
  out.append(buffer, r.ptr);
}

// Integers (ids, sizes) exactly: through a double, ids above 2^53 came back as other ids.
void append_integer(std::string& out, int64_t v) {
  char buffer[24];
  auto r = std::to_chars(buffer, buffer + sizeof(buffer), v);
  out.append(buffer, r.ptr);
}

}  // namespace

void append_json_string(std::string& out, const std::string& s) {
  // JSON text is UTF-8 and simdjson refuses anything else, so a string that is not (a class name
  // from a Latin-1 label map file, say) is an error here instead of a file that does not read back.
  if (!is_valid_utf8(s)) {
    std::string shown;
    for (unsigned char c : s) shown += c >= 0x20 && c < 0x7F ? std::string(1, static_cast<char>(c)) : str("\\x", std::hex, int(c));
    throw Error(str("cannot write \"", shown, "\" to JSON: not valid UTF-8"));
  }
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_json_number(std::string& out, double v) { append_number(out, v); }

void CocoDataset::index() {
  image_index.clear();
  category_index.clear();
  image_index.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    bool fresh = image_index.emplace(images[i].id, static_cast<int64_t>(i)).second;
    DETSEG_CHECK(fresh, source, ": images[", i, "].id: duplicate image id ", images[i].id);
  }
  for (size_t i = 0; i < categories.size(); ++i) {
    bool fresh = category_index.emplace(categories[i].id, static_cast<int64_t>(i)).second;
    DETSEG_CHECK(fresh, source, ": categories[", i, "].id: duplicate category id ", categories[i].id);
  }
  annotations_by_image.assign(images.size(), {});
  for (size_t i = 0; i < annotations.size(); ++i) {
    const auto& ann = annotations[i];
    auto image = image_index.find(ann.image_id);
    DETSEG_CHECK(image != image_index.end(), source, ": annotations[", i, "].image_id: image ",
                 ann.image_id, " is not in \"images\"");
    DETSEG_CHECK(category_index.count(ann.category_id), source, ": annotations[", i,
                 "].category_id: category ", ann.category_id, " is not in \"categories\"");
    annotations_by_image[image->second].push_back(static_cast<int64_t>(i));
  }
}

CocoDataset read_coco(const std::string& path) {
  JsonDocument doc;
  load_json(path, doc);
  DETSEG_CHECK(doc.root.type() == element_type::OBJECT, path,
               ": expected a COCO instances object {images, annotations, categories}, got ",
               type_name(doc.root.type()));
  CocoDataset data;
  data.source = path;
  auto images = get_array(doc.root, path, "images", true);
  data.images.reserve(images.size());
  size_t i = 0;
  for (element value : images) {
    FieldPath at{path, "images", i++};
    if (value.type() != element_type::OBJECT) at.fail("", "expected an object");
    CocoImage image;
    bool has_id = false;
    for (auto field : simdjson::dom::object(value)) {
      const std::string_view key = field.key;
      if (key == "id") {
        image.id = get_integer(field.value, at, key);
        has_id = true;
      } else if (key == "file_name") {
        image.file_name = get_string(field.value, at, key);
      } else if (key == "width") {
        image.width = get_integer(field.value, at, key);
      } else if (key == "height") {
        image.height = get_integer(field.value, at, key);
      }
    }
    if (!has_id) at.fail("id", "missing");
    data.images.push_back(std::move(image));
  }
  auto categories = get_array(doc.root, path, "categories", false);
  i = 0;
  for (element value : categories) {
    FieldPath at{path, "categories", i++};
    if (value.type() != element_type::OBJECT) at.fail("", "expected an object");
    CocoCategory category;
    bool has_id = false;
    for (auto field : simdjson::dom::object(value)) {
      const std::string_view key = field.key;
      if (key == "id") {
        category.id = get_integer(field.value, at, key);
        has_id = true;
      } else if (key == "name") {
        category.name = get_string(field.value, at, key);
      } else if (key == "supercategory") {
        category.supercategory = get_string(field.value, at, key);
      }
    }
    if (!has_id) at.fail("id", "missing");
    data.categories.push_back(std::move(category));
  }
  auto annotations = get_array(doc.root, path, "annotations", false);
  data.annotations.resize(annotations.size());
  i = 0;
  for (element value : annotations) {
    FieldPath at{path, "annotations", i};
    CocoAnnotation& ann = data.annotations[i++];
    Seen seen = read_annotation(value, at, ann);
    if (!seen.id) at.fail("id", "missing");
    if (!seen.image_id) at.fail("image_id", "missing");
    if (!seen.category_id) at.fail("category_id", "missing");
    if (!seen.bbox) at.fail("bbox", "missing (expected [x, y, width, height])");
    if (!seen.area) ann.area = ann.bbox[2] * ann.bbox[3];
  }
  data.index();
  for (size_t j = 0; j < data.annotations.size(); ++j) {
    const CocoAnnotation& ann = data.annotations[j];
    check_polygons(ann.segmentation, data.images[data.image_index.at(ann.image_id)], FieldPath{path, "annotations", j});
  }
  return data;
}

void finish_coco_result(CocoAnnotation& ann, int64_t index, bool box_mode, const CocoImage& image) {
  // As pycocotools' loadRes: ids 1..N in file order, no crowd, area from the box in box mode and
  // from the mask otherwise (then the box too, when none was given).
  ann.id = index + 1;
  ann.iscrowd = false;
  if (box_mode) {
    ann.area = ann.bbox[2] * ann.bbox[3];
  } else {
    CocoRle rle = segmentation_to_rle(ann.segmentation, image.height, image.width);
    ann.area = static_cast<double>(rle_area(rle));
    if (ann.bbox[2] == 0 && ann.bbox[3] == 0) rle_to_box(rle, ann.bbox);
  }
}

CocoDataset coco_results_from(std::vector<CocoAnnotation> detections, const CocoDataset& gt, bool box_mode) {
  CocoDataset data;
  data.source = "detections";
  data.images = gt.images;
  data.categories = gt.categories;
  data.annotations = std::move(detections);
  for (size_t i = 0; i < data.annotations.size(); ++i) {
    CocoAnnotation& ann = data.annotations[i];
    auto image = gt.image_index.find(ann.image_id);
    DETSEG_CHECK(image != gt.image_index.end(), "detections[", i, "].image_id: image ", ann.image_id,
                 " is not in the ground truth ", gt.source);
    DETSEG_CHECK(gt.category_index.count(ann.category_id), "detections[", i, "].category_id: category ",
                 ann.category_id, " is not in the ground truth ", gt.source);
    DETSEG_CHECK(ann.bbox[2] >= 0 && ann.bbox[3] >= 0, "detections[", i, "].bbox: negative size");
    DETSEG_CHECK(!std::isnan(ann.score), "detections[", i, "].score: NaN");
    finish_coco_result(ann, static_cast<int64_t>(i), box_mode, gt.images[image->second]);
  }
  data.index();
  return data;
}

CocoDataset read_coco_results(const std::string& path, const CocoDataset& gt) {
  JsonDocument doc;
  load_json(path, doc);
  return read_coco_results(doc, gt);
}

CocoDataset read_coco_results(const JsonDocument& doc, const CocoDataset& gt) {
  const std::string& path = doc.path;
  DETSEG_CHECK(doc.root.type() == element_type::ARRAY, path,
               ": expected a COCO results list [{image_id, category_id, bbox, score}, ...], got ",
               type_name(doc.root.type()));
  CocoDataset data;
  data.source = path;
  data.images = gt.images;
  data.categories = gt.categories;
  auto results = simdjson::dom::array(doc.root);
  data.annotations.resize(results.size());
  bool box_mode = true;  // pycocotools decides from the first result: a bbox there means boxes
  size_t i = 0;
  for (element value : results) {
    FieldPath at{path, "", i};
    CocoAnnotation& ann = data.annotations[i];
    Seen seen = read_annotation(value, at, ann);
    if (i == 0) box_mode = seen.bbox || !seen.segmentation;
    if (!seen.image_id) at.fail("image_id", "missing");
    if (!seen.category_id) at.fail("category_id", "missing");
    if (!seen.score) at.fail("score", "missing");
    auto image = gt.image_index.find(ann.image_id);
    if (image == gt.image_index.end())
      at.fail("image_id", str("image ", ann.image_id, " is not in the ground truth ", gt.source));
    if (!gt.category_index.count(ann.category_id))
      at.fail("category_id", str("category ", ann.category_id, " is not in the ground truth ", gt.source));
    if (box_mode && !seen.bbox) at.fail("bbox", "missing (the first result has a bbox, so every result needs one)");
    if (!box_mode && !seen.segmentation) at.fail("segmentation", "missing (the first result has only a segmentation)");
    check_polygons(ann.segmentation, gt.images[image->second], at);
    finish_coco_result(ann, static_cast<int64_t>(i), box_mode, gt.images[image->second]);
    ++i;
  }
  data.index();
  return data;
}

void write_coco(const CocoDataset& dataset, const std::string& path) {
  std::string out;
  out.reserve(256 + dataset.annotations.size() * 160);
  out += "{\"images\": [";
  for (size_t i = 0; i < dataset.images.size(); ++i) {
    const auto& im = dataset.images[i];
    out += i ? ",\n  {\"id\": " : "\n  {\"id\": ";
    append_integer(out, im.id);
    out += ", \"file_name\": ";
    append_json_string(out, im.file_name);
    out += ", \"width\": ";
    append_integer(out, im.width);
    out += ", \"height\": ";
    append_integer(out, im.height);
    out += "}";
  }
  out += "],\n\"categories\": [";
  for (size_t i = 0; i < dataset.categories.size(); ++i) {
    const auto& c = dataset.categories[i];
    out += i ? ",\n  {\"id\": " : "\n  {\"id\": ";
    append_integer(out, c.id);
    out += ", \"name\": ";
    append_json_string(out, c.name);
    out += ", \"supercategory\": ";
    append_json_string(out, c.supercategory);
    out += "}";
  }
  out += "],\n\"annotations\": [";
  for (size_t i = 0; i < dataset.annotations.size(); ++i) {
    const auto& a = dataset.annotations[i];
    out += i ? ",\n  {\"id\": " : "\n  {\"id\": ";
    append_integer(out, a.id);
    out += ", ";
    append_ids_and_box_json(out, a);
    out += ", \"area\": ";
    append_number(out, a.area);
    out += a.iscrowd ? ", \"iscrowd\": 1" : ", \"iscrowd\": 0";
    if (a.ignore) out += ", \"ignore\": 1";
    if (a.truncated) out += ", \"truncated\": 1";
    append_segmentation_json(out, a.segmentation);
    out += "}";
  }
  out += "]}\n";
  write_file_atomic(path, out);
}

void append_ids_and_box_json(std::string& out, const CocoAnnotation& a) {
  out += "\"image_id\": ";
  append_integer(out, a.image_id);
  out += ", \"category_id\": ";
  append_integer(out, a.category_id);
  out += ", \"bbox\": [";
  for (int k = 0; k < 4; ++k) {
    if (k) out += ", ";
    append_number(out, a.bbox[k]);
  }
  out += "]";
}

void append_segmentation_json(std::string& out, const CocoSegmentation& segmentation) {
  if (segmentation.kind == CocoSegmentation::kPolygons) {
    out += ", \"segmentation\": [";
    for (size_t p = 0; p < segmentation.polygons.size(); ++p) {
      out += p ? ", [" : "[";
      const auto& xy = segmentation.polygons[p];
      for (size_t k = 0; k < xy.size(); ++k) {
        if (k) out += ", ";
        append_number(out, xy[k]);
      }
      out += "]";
    }
    out += "]";
  } else if (segmentation.kind == CocoSegmentation::kRle) {
    // Uncompressed counts for crowd masks, as the COCO files themselves store them.
    out += ", \"segmentation\": {\"size\": [";
    append_integer(out, segmentation.rle.height);
    out += ", ";
    append_integer(out, segmentation.rle.width);
    out += "], \"counts\": [";
    for (size_t k = 0; k < segmentation.rle.counts.size(); ++k) {
      if (k) out += ", ";
      append_number(out, segmentation.rle.counts[k]);
    }
    out += "]}";
  }
}

}  // namespace detseg

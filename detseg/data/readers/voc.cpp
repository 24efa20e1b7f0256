// Implements: the Pascal VOC folder reader, on tinyxml2 for the XML.
#include "detseg/data/readers/voc.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include <tinyxml2.h>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

// tinyxml2's document as detseg's XmlNode tree: element names, lines, and each element's own
// character data (text and CDATA children, entities decoded) concatenated and trimmed (VOC text
// is one token or phrase inside indentation).
XmlNode to_node(const tinyxml2::XMLElement& element) {
  XmlNode node;
  node.name = element.Name();
  node.line = element.GetLineNum();
  std::string text;
  for (const tinyxml2::XMLNode* child = element.FirstChild(); child != nullptr; child = child->NextSibling()) {
    if (const tinyxml2::XMLElement* e = child->ToElement()) node.children.push_back(to_node(*e));
    else if (const tinyxml2::XMLText* t = child->ToText()) text += t->Value();
  }
  size_t a = 0, b = text.size();
  while (a < b && std::isspace(static_cast<unsigned char>(text[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
  node.text = text.substr(a, b - a);
  return node;
}

// One phrase per tinyxml2 error, in detseg's words (its own ErrorStr is a debugging dump).
std::string xml_error_phrase(const tinyxml2::XMLDocument& doc) {
  // tinyxml2 names the element in its error string as "XMLElement name=<name>".
  std::string element;
  const std::string dump = doc.ErrorStr() ? doc.ErrorStr() : "";
  if (const size_t at = dump.find("name="); at != std::string::npos) element = dump.substr(at + 5);
  const std::string in = element.empty() ? "" : " in <" + element + ">";
  switch (doc.ErrorID()) {
    case tinyxml2::XML_ERROR_EMPTY_DOCUMENT: return "expected a root element, got end of file";
    case tinyxml2::XML_ERROR_MISMATCHED_ELEMENT:  // reported at the start tag's line
      return element.empty() ? "an end tag does not match its start tag"
                             : str("<", element, "> opened here is not closed by </", element, ">");
    case tinyxml2::XML_ERROR_PARSING_ELEMENT: return "malformed tag" + in;
    case tinyxml2::XML_ERROR_PARSING_ATTRIBUTE: return "malformed attribute" + in;
    case tinyxml2::XML_ERROR_PARSING_TEXT: return "malformed text" + in;
    case tinyxml2::XML_ERROR_PARSING_CDATA: return "unterminated CDATA section";
    case tinyxml2::XML_ERROR_PARSING_COMMENT: return "unterminated comment";
    case tinyxml2::XML_ERROR_PARSING_DECLARATION: return "malformed <?...?> declaration";
    case tinyxml2::XML_ERROR_PARSING_UNKNOWN: return "malformed <!...> section";
    case tinyxml2::XML_ELEMENT_DEPTH_EXCEEDED:
      return str("elements nested deeper than ", TINYXML2_MAX_ELEMENT_DEPTH, " levels");
    default: return "an element is not closed before the end of the file, or the markup is broken there";
  }
}

const XmlNode& require(const XmlNode& parent, const std::string& name, const std::string& file) {
  const XmlNode* c = parent.child(name);
  DETSEG_CHECK(c != nullptr, location(file, parent.line), "<", parent.name, "> has no <", name, ">");
  return *c;
}

double require_number(const XmlNode& parent, const std::string& name, const std::string& file) {
  const XmlNode& c = require(parent, name, file);
  char* end = nullptr;
  const double v = std::strtod(c.text.c_str(), &end);
  DETSEG_CHECK(!c.text.empty() && end && *end == '\0' && std::isfinite(v), location(file, c.line), "<", name,
               "> must be a number, got '", c.text, "'");
  return v;
}

const std::string& require_utf8(const XmlNode& node, const std::string& file) {
  DETSEG_CHECK(is_valid_utf8(node.text), location(file, node.line), "<", node.name,
               "> is not UTF-8 text (save the file as UTF-8, or declare its encoding: <?xml version=\"1.0\" "
               "encoding=\"ISO-8859-1\"?>)");
  return node.text;
}

bool read_flag(const XmlNode& object, const std::string& name, const std::string& file) {
  const XmlNode* c = object.child(name);
  if (c == nullptr || c->text.empty()) return false;
  DETSEG_CHECK(c->text == "0" || c->text == "1", location(file, c->line), "<", name, "> must be 0 or 1, got '",
               c->text, "'");
  return c->text == "1";
}

std::vector<std::string> list_ids(const std::string& voc_dir, const std::string& split) {
  std::vector<std::string> ids;
  if (split.empty()) {
    const fs::path dir = fs::path(voc_dir) / "Annotations";
    DETSEG_CHECK(is_directory(dir.string()), dir.string(), ": no Annotations folder (expected a Pascal VOC folder)");
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".xml") ids.push_back(e.path().stem().string());
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  const std::string list = (fs::path(voc_dir) / "ImageSets" / "Main" / (split + ".txt")).string();
  DETSEG_CHECK(file_exists(list), list, ": split list not found (--split ", split, ")");
  std::istringstream in(read_file(list));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string id;
    if (words >> id) ids.push_back(id);  // class lists carry a second column (1/-1): skip it
  }
  return ids;
}

struct ParsedObject {
  std::string name;
  long line;
  double box[4];
  bool difficult, truncated;
};

}  // namespace

const XmlNode* XmlNode::child(const std::string& child_name) const {
  for (const auto& c : children)
    if (c.name == child_name) return &c;
  return nullptr;
}

namespace {
// The encoding named by an <?xml ... encoding="..."?> declaration, lower-cased ("" when none).
std::string declared_encoding(const std::string& text) {
  if (text.compare(0, 5, "<?xml") != 0) return "";
  const std::string prolog = text.substr(0, text.find("?>"));
  const size_t key = prolog.find("encoding");
  if (key == std::string::npos) return "";
  const size_t open = prolog.find_first_of("\"'", key);
  if (open == std::string::npos) return "";
  const size_t close = prolog.find(prolog[open], open + 1);
  if (close == std::string::npos) return "";
  std::string name = prolog.substr(open + 1, close - open - 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}
}  // namespace

XmlNode parse_xml(const std::string& text, const std::string& file) {
  // Latin-1 files (some labelling tools on Windows write them) become UTF-8 here, byte for code
  // point; tinyxml2 reads UTF-8 only.
  std::string utf8;
  const std::string encoding = declared_encoding(text);
  if (encoding == "iso-8859-1" || encoding == "latin-1" || encoding == "latin1") {
    utf8.reserve(text.size() + text.size() / 8);
    for (char c : text) append_utf8(utf8, static_cast<unsigned char>(c));
  }
  const std::string& xml = utf8.empty() ? text : utf8;
  tinyxml2::XMLDocument doc(/*processEntities=*/true, tinyxml2::PRESERVE_WHITESPACE);
  doc.Parse(xml.data(), xml.size());
  if (doc.Error())
    throw Error(location(file, std::max(1, doc.ErrorLineNum())) + "malformed XML: " + xml_error_phrase(doc));
  const tinyxml2::XMLElement* root = doc.RootElement();
  DETSEG_CHECK(root != nullptr, location(file, 1), "malformed XML: expected a root element, got none");
  // tinyxml2 accepts several top-level elements; a VOC file (and XML) has one.
  if (const tinyxml2::XMLElement* extra = root->NextSiblingElement())
    throw Error(location(file, extra->GetLineNum()) + str("malformed XML: expected end of file after </", root->Name(),
                                                          ">, got <", extra->Name(), ">"));
  return to_node(*root);
}

CocoDataset read_voc(const std::string& voc_dir, const VocOptions& options) {
  const std::vector<std::string> ids = list_ids(voc_dir, options.split);
  DETSEG_CHECK(!ids.empty(), voc_dir, ": no annotations found", options.split.empty() ? "" : " in split " + options.split);
  const fs::path image_dir = fs::path(voc_dir) / "JPEGImages";

  CocoDataset out;
  out.source = voc_dir;
  std::vector<std::vector<ParsedObject>> objects(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string file = (fs::path(voc_dir) / "Annotations" / (ids[i] + ".xml")).string();
    const XmlNode root = parse_xml(read_file(file), file);
    DETSEG_CHECK(root.name == "annotation", location(file, root.line), "expected root element <annotation>, got <",
                 root.name, ">");
    CocoImage image;
    image.id = static_cast<int64_t>(i) + 1;
    const XmlNode* filename = root.child("filename");
    if (filename) require_utf8(*filename, file);
    image.file_name = filename && !filename->text.empty() ? filename->text : ids[i] + ".jpg";
    if (options.check_images && !file_exists((image_dir / image.file_name).string())) {
      // Some VOC writers store the name without extension or with a stale one: fall back to <id>.jpg.
      const std::string fallback = ids[i] + ".jpg";
      DETSEG_CHECK(file_exists((image_dir / fallback).string()), file, ": image not found: ",
                   (image_dir / image.file_name).string());
      image.file_name = fallback;
    }
    const XmlNode& size = require(root, "size", file);
    const double width = require_number(size, "width", file), height = require_number(size, "height", file);
    // Checked as doubles, before the cast: converting one past int64 to an integer is undefined.
    DETSEG_CHECK(width >= 1 && height >= 1, location(file, size.line), "image size must be positive, got ", width, "x",
                 height);
    DETSEG_CHECK(width < 9e18 && height < 9e18, location(file, size.line), "image size ", width, "x", height,
                 " is out of range");
    image.width = static_cast<int64_t>(width);
    image.height = static_cast<int64_t>(height);
    out.images.push_back(image);
    for (const XmlNode& obj : root.children) {
      if (obj.name != "object") continue;
      ParsedObject p;
      p.name = require_utf8(require(obj, "name", file), file);
      p.line = obj.line;
      const XmlNode& box = require(obj, "bndbox", file);
      p.box[0] = require_number(box, "xmin", file);
      p.box[1] = require_number(box, "ymin", file);
      p.box[2] = require_number(box, "xmax", file);
      p.box[3] = require_number(box, "ymax", file);
      // COCO keeps width and height, which cannot be negative: an inverted box is an error here,
      // not a file that detseg's own COCO reader would then refuse.
      DETSEG_CHECK(p.box[2] >= p.box[0] && p.box[3] >= p.box[1], location(file, box.line), "<bndbox> has xmax < xmin or ymax < ymin (",
                   p.box[0], ", ", p.box[1], ", ", p.box[2], ", ", p.box[3], ")");
      p.difficult = read_flag(obj, "difficult", file);
      p.truncated = read_flag(obj, "truncated", file);
      objects[i].push_back(p);
    }
  }

  LabelMap labels = options.label_map;
  if (labels.entries.empty()) {
    std::map<std::string, int> names;  // sorted
    for (const auto& list : objects)
      for (const auto& p : list) names[p.name] = 0;
    for (const auto& [name, unused] : names) labels.entries.push_back({static_cast<int64_t>(labels.size()) + 1, name});
  }
  for (const auto& e : labels.entries) out.categories.push_back({e.id, e.name, ""});

  int64_t next_id = 1;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string file = (fs::path(voc_dir) / "Annotations" / (ids[i] + ".xml")).string();
    for (const auto& p : objects[i]) {
      CocoAnnotation a;
      a.id = next_id++;
      a.image_id = out.images[i].id;
      a.category_id = labels.id_of(p.name);
      DETSEG_CHECK(a.category_id >= 0, location(file, p.line), "unknown class '", p.name, "' (not in the label map)");
      a.bbox[0] = p.box[0];
      a.bbox[1] = p.box[1];
      a.bbox[2] = p.box[2] - p.box[0];
      a.bbox[3] = p.box[3] - p.box[1];
      a.area = std::max(0.0, a.bbox[2]) * std::max(0.0, a.bbox[3]);
      a.ignore = p.difficult;
      a.truncated = p.truncated;
      out.annotations.push_back(a);
    }
  }
  return out;
}

}  // namespace detseg

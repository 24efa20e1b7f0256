// Implements: a small XML parser (the VOC subset: elements, text, comments, prolog, CDATA) and the
// Pascal VOC folder reader on top of it.
#include "detseg/data/readers/voc.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/core/json.h"

namespace detseg {
namespace fs = std::filesystem;

namespace {

class XmlParser {
 public:
  XmlParser(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  XmlNode parse_document() {
    skip_misc();
    if (pos_ >= s_.size()) fail("expected a root element, got end of file");
    if (s_[pos_] != '<') fail(str("expected '<' starting the root element, got '", s_[pos_], "'"));
    XmlNode root = parse_element();
    skip_misc();
    if (pos_ < s_.size()) fail(str("expected end of file after </", root.name, ">, got more content"));
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error(location(file_, line_) + "malformed XML: " + what); }

  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_)
      if (s_[pos_] == '\n') ++line_;
  }
  bool starts(const char* p) const { return s_.compare(pos_, std::char_traits<char>::length(p), p) == 0; }
  void skip_until(const char* end, const char* what) {
    const size_t found = s_.find(end, pos_);
    if (found == std::string::npos) fail(str("unterminated ", what, ", expected '", end, "'"));
    advance(found + std::char_traits<char>::length(end) - pos_);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) advance(1);
  }
  // Whitespace, comments, processing instructions, DOCTYPE.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<?")) skip_until("?>", "processing instruction");
      else if (starts("<!--")) skip_until("-->", "comment");
      else if (starts("<!DOCTYPE")) skip_until(">", "DOCTYPE");
      else return;
    }
  }
  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                s_[pos_] == '-' || s_[pos_] == '.' || s_[pos_] == ':'))
      advance(1);
    if (pos_ == start) fail(str("expected an element name, got ", pos_ < s_.size() ? str("'", s_[pos_], "'") : "end of file"));
    return s_.substr(start, pos_ - start);
  }
  void append_text(std::string& out, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (s_[i] != '&') {
        out += s_[i];
        continue;
      }
      const size_t semi = s_.find(';', i);
      const std::string ent = semi == std::string::npos ? "" : s_.substr(i + 1, semi - i - 1);
      if (ent == "amp") out += '&';
      else if (ent == "lt") out += '<';
      else if (ent == "gt") out += '>';
      else if (ent == "quot") out += '"';
      else if (ent == "apos") out += '\'';
      else if (ent.size() > 1 && ent[0] == '#') append_char_reference(out, ent);
      else fail(str("unknown entity '&", ent, ";'"));
      i = semi;
    }
  }

  // &#233; or &#xE9; as UTF-8 (the only encoding detseg's COCO files can carry).
  void append_char_reference(std::string& out, const std::string& ent) {
    const bool hex = ent[1] == 'x' || ent[1] == 'X';
    const std::string digits = ent.substr(hex ? 2 : 1);
    char* end = nullptr;
    errno = 0;
    const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
    if (digits.empty() || *end != '\0' || errno != 0 || cp == 0 || cp > 0x10FFFF ||
        !append_utf8(out, static_cast<uint32_t>(cp)))
      fail(str("invalid character reference '&", ent, ";'"));
  }

  XmlNode parse_element(int depth = 0) {
    // Real VOC files are 3 levels deep; the bound keeps a hostile file from exhausting the stack.
    constexpr int kMaxDepth = 256;
    if (depth > kMaxDepth) fail(str("elements nested deeper than ", kMaxDepth, " levels"));
    XmlNode node;
    node.line = line_;
    advance(1);  // '<'
    node.name = parse_name();
    // Attributes: skipped, but quoted values may hold '>'.
    for (;;) {
      if (pos_ >= s_.size()) fail(str("unterminated start tag <", node.name, ">"));
      const char c = s_[pos_];
      if (c == '"' || c == '\'') {
        const size_t close = s_.find(c, pos_ + 1);
        if (close == std::string::npos) fail("unterminated attribute value");
        advance(close + 1 - pos_);
      } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '>') {
        advance(2);
        return node;
      } else if (c == '>') {
        advance(1);
        break;
      } else if (c == '<') {
        fail(str("expected '>' closing the start tag <", node.name, ">, got '<'"));
      } else {
        advance(1);
      }
    }
    std::string text;
    for (;;) {
      const size_t lt = s_.find('<', pos_);
      if (lt == std::string::npos) {
        advance(s_.size() - pos_);  // report the line where the file ends
        fail(str("expected </", node.name, "> (element opened at line ", node.line, "), got end of file"));
      }
      append_text(text, pos_, lt);
      advance(lt - pos_);
      if (starts("</")) {
        advance(2);
        const long close_line = line_;
        const std::string name = parse_name();
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '>') fail(str("expected '>' after </", name));
        if (name != node.name) {
          line_ = close_line;
          fail(str("expected </", node.name, "> (element opened at line ", node.line, "), got </", name, ">"));
        }
        advance(1);
        break;
      }
      if (starts("<!--")) {
        skip_until("-->", "comment");
      } else if (starts("<![CDATA[")) {
        const size_t end = s_.find("]]>", pos_);
        if (end == std::string::npos) fail("unterminated CDATA section");
        text.append(s_, pos_ + 9, end - pos_ - 9);
        advance(end + 3 - pos_);
      } else if (starts("<?")) {
        skip_until("?>", "processing instruction");
      } else {
        node.children.push_back(parse_element(depth + 1));
      }
    }
    // Trim: VOC text is always a single token or phrase surrounded by indentation.
    size_t a = 0, b = text.size();
    while (a < b && std::isspace(static_cast<unsigned char>(text[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
    node.text = text.substr(a, b - a);
    return node;
  }

  const std::string& s_;
  const std::string& file_;
  size_t pos_ = 0;
  long line_ = 1;
};

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
  // Latin-1 files (some labelling tools on Windows write them) become UTF-8 here, byte for code point.
  const std::string encoding = declared_encoding(text);
  if (encoding == "iso-8859-1" || encoding == "latin-1" || encoding == "latin1") {
    std::string utf8;
    utf8.reserve(text.size() + text.size() / 8);
    for (char c : text) append_utf8(utf8, static_cast<unsigned char>(c));
    return XmlParser(utf8, file).parse_document();
  }
  return XmlParser(text, file).parse_document();
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

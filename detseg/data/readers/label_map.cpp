// Implements: label map parsing (plain text lines or OD API pbtxt).
#include "detseg/data/readers/label_map.h"

#include <cctype>
#include <charconv>
#include <sstream>
#include <unordered_set>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// The id that `digits` (decimal digits only, checked by the caller) spell. std::stoll threw its
// own std::out_of_range past int64, which no caller catches.
int64_t parse_id(const std::string& digits, const std::string& where) {
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  DETSEG_CHECK(ec == std::errc() && end == digits.data() + digits.size(), where, "label map id ", digits,
               " is out of range");
  return id;
}

void add_entry(LabelMap& map, int64_t id, const std::string& name, const std::string& where) {
  DETSEG_CHECK(!name.empty(), where, "label map entry has an empty name");
  DETSEG_CHECK(map.id_of(name) < 0, where, "duplicate class name '", name, "' in label map");
  DETSEG_CHECK(map.name_of(id).empty(), where, "duplicate class id ", id, " in label map");
  map.entries.push_back({id, name});
}

struct Token {
  std::string text;
  long line;
  bool quoted;
};

// pbtxt tokens: '{', '}', ':', quoted strings, and bare words; '#' starts a comment.
std::vector<Token> tokenize_pbtxt(const std::string& text, const std::string& file) {
  std::vector<Token> tokens;
  long line = 1;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '{' || c == '}' || c == ':') {
      tokens.push_back({std::string(1, c), line, false});
      ++i;
    } else if (c == '\'' || c == '"') {
      const size_t close = text.find(c, i + 1);
      DETSEG_CHECK(close != std::string::npos && text.find('\n', i) > close, location(file, line),
                   "unterminated string in label map");
      tokens.push_back({text.substr(i + 1, close - i - 1), line, true});
      i = close + 1;
    } else {
      size_t j = i;
      while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j])) && text[j] != '{' &&
             text[j] != '}' && text[j] != ':' && text[j] != '#')
        ++j;
      tokens.push_back({text.substr(i, j - i), line, false});
      i = j;
    }
  }
  return tokens;
}

// pbtxt: item { id: 1 name: 'x' display_name: 'y' } ...
LabelMap parse_pbtxt(const std::string& text, const std::string& file) {
  const std::vector<Token> t = tokenize_pbtxt(text, file);
  LabelMap map;
  size_t i = 0;
  auto expect = [&](const char* what) -> const Token& {
    DETSEG_CHECK(i < t.size(), file, ": label map ends early, expected ", what);
    DETSEG_CHECK(t[i].quoted || t[i].text == what || std::string(what) == "a value", location(file, t[i].line),
                 "expected '", what, "' in label map, got '", t[i].text, "'");
    return t[i++];
  };
  while (i < t.size()) {
    const long item_line = t[i].line;
    expect("item");
    expect("{");
    int64_t id = -1;
    std::string name, display_name;
    while (i < t.size() && !(t[i].text == "}" && !t[i].quoted)) {
      const Token& key = t[i++];
      expect(":");
      const Token& value = expect("a value");
      if (key.text == "id") {
        DETSEG_CHECK(!value.text.empty() && value.text.find_first_not_of("0123456789") == std::string::npos,
                     location(file, value.line), "label map id must be an integer, got '", value.text, "'");
        id = parse_id(value.text, location(file, value.line));
      } else if (key.text == "name") {
        name = value.text;
      } else if (key.text == "display_name") {
        display_name = value.text;
      }
    }
    expect("}");
    DETSEG_CHECK(id >= 0, location(file, item_line), "label map item has no 'id'");
    add_entry(map, id, name.empty() ? display_name : name, location(file, item_line));
  }
  return map;
}

}  // namespace

int64_t LabelMap::id_of(const std::string& name) const {
  for (const auto& e : entries)
    if (e.name == name) return e.id;
  return -1;
}

std::string LabelMap::name_of(int64_t id) const {
  for (const auto& e : entries)
    if (e.id == id) return e.name;
  return "";
}

LabelMap parse_label_map(const std::string& text, const std::string& file) {
  if (text.find("item") != std::string::npos && text.find('{') != std::string::npos) return parse_pbtxt(text, file);
  LabelMap map;
  std::istringstream in(text);
  std::string line;
  long line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto space = t.find_first_of(" \t");
    const std::string first = t.substr(0, space);
    const bool numbered = space != std::string::npos &&
                          first.find_first_not_of("0123456789") == std::string::npos;
    if (numbered) {
      add_entry(map, parse_id(first, location(file, line_no)), trim(t.substr(space)), location(file, line_no));
    } else {
      add_entry(map, static_cast<int64_t>(map.entries.size()) + 1, t, location(file, line_no));
    }
  }
  DETSEG_CHECK(!map.entries.empty(), file, ": label map has no entries");
  return map;
}

LabelMap read_label_map(const std::string& path) { return parse_label_map(read_file(path), path); }

}  // namespace detseg

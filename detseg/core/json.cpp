#include "detseg/core/json.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t cp = 0;
    if (c < 0x80) length = 1, cp = c;
    else if ((c & 0xE0) == 0xC0) length = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) length = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) length = 4, cp = c & 0x07;
    else return false;
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    static const uint32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[length] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += length;
  }
  return true;
}

bool append_utf8(std::string& out, uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return true;
}

void line_column(const std::string& text, size_t offset, long& line, long& column) {
  line = 1;
  column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
}

namespace {

// simdjson rejects documents nested deeper than its parser's max depth and integers beyond 64 bits
// without saying where. Both are rare, so on those errors this scan walks the text once more,
// keeping the field path ("annotations[3].bbox"), and names the first offending place.
struct JsonPlace {
  size_t offset = 0;
  std::string field;
  std::string what;
};

bool locate_json_problem(const std::string& text, size_t max_depth, JsonPlace& out) {
  struct Frame {
    bool array;
    size_t index;
    std::string key;
  };
  std::vector<Frame> stack;
  bool expect_key = false;
  auto path = [&] {
    std::string p;
    for (size_t k = 0; k < stack.size(); ++k) {
      // A deep path keeps its first and last few steps: "images[0].x[0]...[0][0]".
      if (stack.size() > 12 && k >= 6 && k + 3 < stack.size()) {
        if (k == 6) p += "...";
        continue;
      }
      const Frame& f = stack[k];
      if (f.array) p += "[" + std::to_string(f.index) + "]";
      else if (!f.key.empty()) p += (p.empty() ? "" : ".") + f.key;
    }
    return p.empty() ? std::string("the top level") : p;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t start = ++i;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (expect_key && !stack.empty()) {
        stack.back().key = text.substr(start, std::min(i, text.size()) - start);
        expect_key = false;
      }
    } else if (c == '{' || c == '[') {
      if (stack.size() >= max_depth) {
        out = {i, path(), str("nested deeper than ", max_depth, " levels")};
        return true;
      }
      stack.push_back({c == '[', 0, ""});
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty()) {
        ++stack.back().index;
        expect_key = !stack.back().array;
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = i;
      bool integer = true;
      while (i + 1 < text.size() && std::strchr("+-0123456789.eE", text[i + 1]) != nullptr) {
        integer = integer && std::strchr(".eE", text[i + 1]) == nullptr;
        ++i;
      }
      const std::string literal = text.substr(start, i + 1 - start);
      const size_t digits = literal.size() - (literal[0] == '-');
      // int64 / uint64 hold every integer of up to 18 digits; longer ones are compared exactly.
      if (integer && digits >= 19) {
        const bool negative = literal[0] == '-';
        const std::string limit = negative ? "9223372036854775808" : "18446744073709551615";
        const std::string magnitude = literal.substr(negative);
        if (magnitude.size() > limit.size() || (magnitude.size() == limit.size() && magnitude > limit)) {
          out = {start, path(), str("integer ", literal, " does not fit in 64 bits")};
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

void load_json(const std::string& path, JsonDocument& doc) {
  doc.path = path;
  DETSEG_CHECK(!is_directory(path), path, ": is a folder, expected a JSON file");
  simdjson::padded_string buffer;
  auto load_error = simdjson::padded_string::load(path).get(buffer);
  DETSEG_CHECK(!load_error, path, ": cannot read JSON file: ", simdjson::error_message(load_error));
  auto error = doc.parser.parse(buffer).get(doc.root);
  if (!error) return;
  // simdjson reports no position. Malformed input is the rare path, so re-parse with nlohmann,
  // which gives the byte offset, and turn that into line:column.
  const std::string text(buffer.data(), buffer.size());
  JsonPlace place;
  if ((error == simdjson::DEPTH_ERROR || error == simdjson::NUMBER_ERROR || error == simdjson::NUMBER_OUT_OF_RANGE) &&
      locate_json_problem(text, doc.parser.max_depth(), place)) {
    long line = 0, column = 0;
    line_column(text, place.offset, line, column);
    throw Error(location(path, line, column) + place.field + ": " + place.what);
  }
  try {
    auto ignored = nlohmann::json::parse(text);
    (void)ignored;
  } catch (const nlohmann::json::parse_error& e) {
    long line = 0, column = 0;
    line_column(text, e.byte > 0 ? e.byte - 1 : 0, line, column);
    std::string what = e.what();
    auto pos = what.find("syntax error");
    throw Error(location(path, line, column) + "malformed JSON: " +
                (pos == std::string::npos ? what : what.substr(pos)));
  } catch (const std::exception&) {
  }
  throw Error(str(path, ": malformed JSON: ", simdjson::error_message(error)));
}

}  // namespace detseg

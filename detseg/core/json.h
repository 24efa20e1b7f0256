// Implements: loading JSON files fast (simdjson, ~GB/s) with errors that say file, line and column.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace detseg {

// A parsed JSON document that owns its buffer. Keep it alive while reading `root`.
struct JsonDocument {
  std::string path;
  simdjson::dom::parser parser;
  simdjson::dom::element root;
};

// Parses `path`; on malformed JSON throws Error "path:line:column: what was expected".
void load_json(const std::string& path, JsonDocument& doc);

// True when `text` is well-formed UTF-8 (what JSON files, and so COCO files, must hold).
bool is_valid_utf8(std::string_view text);
// Appends code point `cp` encoded as UTF-8; false (nothing appended) for a surrogate or cp > 0x10FFFF.
bool append_utf8(std::string& out, uint32_t cp);

// Line and column (1-based) of byte `offset` in `text`.
void line_column(const std::string& text, size_t offset, long& line, long& column);

}  // namespace detseg

#include "detseg/core/json.h"

#include <nlohmann/json.hpp>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {

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

void load_json(const std::string& path, JsonDocument& doc) {
  doc.path = path;
  simdjson::padded_string buffer;
  auto load_error = simdjson::padded_string::load(path).get(buffer);
  DETSEG_CHECK(!load_error, path, ": cannot read JSON file: ", simdjson::error_message(load_error));
  auto error = doc.parser.parse(buffer).get(doc.root);
  if (!error) return;
  // simdjson reports no position. Malformed input is the rare path, so re-parse with nlohmann,
  // which gives the byte offset, and turn that into line:column.
  const std::string text(buffer.data(), buffer.size());
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

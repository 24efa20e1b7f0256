// Implements: escaping literal names and compiling the user's parameter-name patterns (ECMAScript regex, matched with
// std::regex_search) with a ConfigError that names the bad pattern and what it was for.
#pragma once

#include <regex>
#include <string>

#include "detseg/core/error.h"

namespace detseg {

inline std::regex compile_name_pattern(const std::string& pattern, const char* what) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError(str("invalid ", what, " pattern '", pattern, "': ", e.what()));
  }
}

// `text` with the regex metacharacters escaped, so it matches literally.
inline std::string escape_regex(const std::string& text) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : text) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace detseg

// Implements: compiling the user's parameter-name patterns (ECMAScript regex, matched with
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

}  // namespace detseg

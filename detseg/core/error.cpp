#include "detseg/core/error.h"

namespace detseg {

std::string location(const std::string& file, long line, long column) {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  if (line > 0 && column > 0) out += ":" + std::to_string(column);
  if (!out.empty()) out += ": ";
  return out;
}

}  // namespace detseg

#include "detseg/core/out_of_memory.h"

#include <cstdio>
#include <cstdlib>

namespace detseg {
namespace {

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), bytes < 1e9 ? "%.2f GB" : "%.1f GB", bytes / 1e9);
  return text;
}

// The text between `key` and the next `stop` (not included), or "" when either is missing.
std::string between(const std::string& text, const std::string& key, const std::string& stop) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size(), end = text.find(stop, begin);
  return end == std::string::npos ? "" : text.substr(begin, end - begin);
}

}  // namespace

std::string out_of_memory_text(const std::string& what) {
  const std::string line = what.substr(0, what.find('\n'));
  if (line.rfind("out of memory", 0) == 0) return line;
  // LibTorch's CPU allocator: "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. ..."
  if (line.find("can't allocate memory") != std::string::npos || line.find("not enough memory") != std::string::npos) {
    const std::string bytes = between(line, "you tried to allocate ", " ");
    if (bytes.empty()) return "out of memory: the system refused a block of memory";
    return "out of memory: a block of " + gigabytes(std::strtod(bytes.c_str(), nullptr)) +
           " was asked for, and the system refused it";
  }
  // Its CUDA caching allocator: "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total
  // capacity of 79.19 GiB of which 3.20 GiB is free. ..."
  if (line.find("CUDA out of memory") != std::string::npos) {
    const std::string size = between(line, "Tried to allocate ", ". ");
    const std::string gpu = between(line, "GPU ", " has");
    const std::string total = between(line, "total capacity of ", " of which");
    const std::string free = between(line, "of which ", " is free");
    std::string text = "out of GPU memory: a block of " + (size.empty() ? std::string("memory") : size) + " was asked for";
    if (!gpu.empty() && !total.empty() && !free.empty())
      text += "; GPU " + gpu + " has " + free + " free of " + total;
    return text;
  }
  if (line == "std::bad_alloc" || line.find("out of memory") != std::string::npos) return "out of memory";
  return "";
}

}  // namespace detseg

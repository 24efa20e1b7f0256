#include "detseg/core/yaml.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "detseg/core/error.h"
#include "detseg/core/files.h"

namespace detseg {
namespace {

[[noreturn]] void fail(YamlErrorKind kind, const std::string& message) {
  if (kind == YamlErrorKind::kConfig) throw ConfigError(message);
  throw Error(message);
}

std::string limit_text() { return str(kMaxYamlBytes >> 20, " MiB (", kMaxYamlBytes, " bytes)"); }

}  // namespace

void check_yaml_size(int64_t bytes, const std::string& source, YamlErrorKind kind) {
  if (bytes > kMaxYamlBytes)
    fail(kind, str(location(source), bytes, " bytes, more than the ", limit_text(), " detseg reads from a YAML file"));
}

std::string read_yaml_file(const std::string& path, YamlErrorKind kind) {
  // The size on disk refuses a large file unread; a pipe or a /proc file reports none (or 0), so
  // the read itself stops one byte past the limit as well.
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) check_yaml_size(static_cast<int64_t>(size), path, kind);
  }
  if (is_directory(path)) fail(kind, path + ": is a folder, expected a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(str(path, ": cannot open for reading: ", std::strerror(errno)));
  std::string text;
  std::vector<char> chunk(64 * 1024);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > kMaxYamlBytes)
      fail(kind, str(location(path), "more than the ", limit_text(), " detseg reads from a YAML file"));
  }
  if (in.bad()) throw Error(path + ": read failed");
  return text;
}

void check_yaml_expansion(const YAML::Node& root, const std::string& source, YamlErrorKind kind, int64_t max_nodes) {
  // yaml-cpp gives an alias the very node of its anchor, so a plain depth-first walk visits an
  // anchor's content once per alias: exactly what a reader of the tree would visit. Each node is
  // counted when it is reached; only lists and mappings wait on the stack (a mapping that holds
  // itself keeps one entry there, not one per turn).
  std::vector<YAML::Node> pending;
  int64_t visited = 0;
  auto reach = [&](const YAML::Node& node) {
    if (++visited > max_nodes)
      fail(kind, str(location(source), "YAML aliases expand to more than ", max_nodes, " nodes (an alias bomb?)"));
    if (node.IsSequence() || node.IsMap()) pending.push_back(node);
  };
  reach(root);
  while (!pending.empty()) {
    const YAML::Node node = pending.back();
    pending.pop_back();
    if (node.IsSequence()) {
      for (const auto& item : node) reach(item);
    } else {
      for (const auto& item : node) {
        reach(item.first);
        reach(item.second);
      }
    }
  }
}

}  // namespace detseg

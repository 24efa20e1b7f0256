#include "detseg/core/yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
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

namespace {

// Counts nodes as the parser reports them; stops the parse (by throwing) at the limit, so a huge
// document costs the time to read max_nodes of it and no memory beyond the parser's own.
class NodeCounter : public YAML::EventHandler {
 public:
  NodeCounter(int64_t max_nodes, const std::string& source, YamlErrorKind kind)
      : max_nodes_(max_nodes), source_(source), kind_(kind) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    count(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    count(mark);
  }
  void OnMapEnd() override {}

 private:
  void count(const YAML::Mark& mark) {
    if (++nodes_ > max_nodes_)
      fail(kind_, str(location(source_, mark.line + 1), "a YAML document of more than ", max_nodes_,
                      " nodes (each list item, key and value is one); detseg reads at most ", max_nodes_,
                      " (a pipeline config has a few hundred)"));
  }
  int64_t nodes_ = 0;
  int64_t max_nodes_;
  const std::string& source_;
  YamlErrorKind kind_;
};

}  // namespace

void check_yaml_node_count(const std::string& text, const std::string& source, YamlErrorKind kind, int64_t max_nodes) {
  std::istringstream in(text);
  NodeCounter counter(max_nodes, source, kind);
  try {
    YAML::Parser parser(in);
    parser.HandleNextDocument(counter);
  } catch (const YAML::Exception&) {
    // Malformed: YAML::Load reports it with its line and column.
  }
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

// Implements: reading YAML (pipeline configs, their _base_ files, --set values, YOLO data.yaml)
// within fixed bounds. yaml-cpp builds a node graph in memory, ~0.5 kB per node (a 50 MB list
// took 4.4 GB and 51 s), and an alias shares its anchor's node, so a 300-byte "billion laughs"
// document loads at once but stands for 9^9 nodes that any walk over the tree then visits.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace detseg {

// A pipeline config is a few kB, a YOLO data.yaml a few hundred bytes (COCO's 80 names: 1.5 kB).
inline constexpr int64_t kMaxYamlBytes = int64_t(1) << 20;
// Nodes a document may stand for with every alias expanded (a config has a few hundred).
inline constexpr int64_t kMaxYamlNodes = 1000000;

// Which of detseg's errors a bound throws: ConfigError (a config: exit 2) or Error (a data file).
enum class YamlErrorKind { kConfig, kData };

// The text of the YAML file `path`. One larger than kMaxYamlBytes is refused before it is read:
// "x.yaml: 2097152 bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file".
std::string read_yaml_file(const std::string& path, YamlErrorKind kind);

// Throws when `bytes` of YAML from `source` (a file, or "--set key=value") exceed kMaxYamlBytes.
void check_yaml_size(int64_t bytes, const std::string& source, YamlErrorKind kind);

// Walks `root` as a reader would, each alias as the content it stands for, and throws
// "source: YAML aliases expand to more than N nodes (an alias bomb?)" as soon as the walk passes
// `max_nodes` (an alias inside its own anchor expands without end and ends there too). Iterative:
// no recursion depth to overflow.
void check_yaml_expansion(const YAML::Node& root, const std::string& source, YamlErrorKind kind,
                          int64_t max_nodes = kMaxYamlNodes);

}  // namespace detseg

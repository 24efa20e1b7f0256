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
// Nodes a document may write out (aliases once): yaml-cpp's tree costs ~480 bytes a node, so this
// keeps it under ~20 MB, 20x the largest file read (a 1 MiB flow list of 1s would take 236 MB).
// COCO's 80 class names are 81 nodes; a YOLO data.yaml with ImageNet-21k's names would fit.
inline constexpr int64_t kMaxYamlTreeNodes = 40000;

// Which of detseg's errors a bound throws: ConfigError (a config: exit 2) or Error (a data file).
enum class YamlErrorKind { kConfig, kData };

// The text of the YAML file `path`. One larger than kMaxYamlBytes is refused before it is read:
// "x.yaml: 2097152 bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file".
std::string read_yaml_file(const std::string& path, YamlErrorKind kind);

// Throws when `bytes` of YAML from `source` (a file, or "--set key=value") exceed kMaxYamlBytes.
void check_yaml_size(int64_t bytes, const std::string& source, YamlErrorKind kind);

// Counts the nodes of the first document in `text` from yaml-cpp's event stream, before any tree
// is built, and throws "source:LINE: a YAML document of more than 40000 nodes (...)" past
// `max_nodes`. Malformed YAML is left for the loader to report with its position.
void check_yaml_node_count(const std::string& text, const std::string& source, YamlErrorKind kind,
                           int64_t max_nodes = kMaxYamlTreeNodes);

// Walks `root` as a reader would, each alias as the content it stands for, and throws
// "source: YAML aliases expand to more than N nodes (an alias bomb?)" as soon as the walk passes
// `max_nodes` (an alias inside its own anchor expands without end and ends there too). Iterative:
// no recursion depth to overflow.
void check_yaml_expansion(const YAML::Node& root, const std::string& source, YamlErrorKind kind,
                          int64_t max_nodes = kMaxYamlNodes);

}  // namespace detseg

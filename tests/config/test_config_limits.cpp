// Every YAML detseg reads (configs, _base_ files, --set values, YOLO data.yaml) within bounds:
// aliases that expand past kMaxYamlNodes, documents of more than kMaxYamlTreeNodes and files over
// kMaxYamlBytes end in one line naming the file, in milliseconds; and errors a --set value causes name that --set, not the config file.
#include <gtest/gtest.h>

#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "detseg/config/config.h"
#include "detseg/core/error.h"
#include "detseg/core/yaml.h"
#include "detseg/data/readers/yolo.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using detseg::ConfigError;
using detseg::kMaxYamlBytes;
using detseg::parse_config;

namespace {

const char* kMinimal = "model:\n  num_classes: 3\ntrain:\n  batch_size: 4\n";

// "Billion laughs": 9 anchors, each a list of 9 aliases of the one before: 9^9 = 387 M leaves
// (307 bytes). Before the bound, the walk that refuses duplicate keys ran for hours.
std::string alias_bomb(const std::string& indent = "") {
  std::string text = indent + "a: &a [x,x,x,x,x,x,x,x,x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    text += indent + c + ": &" + c + " [";
    for (int k = 0; k < 9; ++k) text += std::string(k ? "," : "") + "*" + static_cast<char>(c - 1);
    text += "]\n";
  }
  return text;
}

// The same in YAML's flow style, for a --set value: [&a [x, ...], &b [*a, ...], ...].
std::string flow_alias_bomb() {
  std::string text = "[&a [x,x,x,x,x,x,x,x,x]";
  for (char c = 'b'; c <= 'i'; ++c) {
    text += std::string(", &") + c + " [";
    for (int k = 0; k < 9; ++k) text += std::string(k ? "," : "") + "*" + static_cast<char>(c - 1);
    text += "]";
  }
  return text + "]";
}

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {},
                     const std::string& source = "configs/x.yaml") {
  try {
    parse_config(yaml, source, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string load_error(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    detseg::load_config(path, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// scripts/sanitize.sh builds this file under AddressSanitizer too.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
// Under AddressSanitizer the walk runs ~5x slower.
constexpr double kFast = kAddressSanitizer ? 5.0 : 1.0;

const std::string kBombMessage = "YAML aliases expand to more than 1000000 nodes (an alias bomb?)";

}  // namespace

TEST(ConfigLimits, AliasBombIsRefusedAtOnce) {
  const std::string bomb = alias_bomb();
  ASSERT_LT(bomb.size(), 421u);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of(bomb), "configs/x.yaml: " + kBombMessage);
  EXPECT_LT(seconds_since(t0), kFast);
  // Inside a known section, where the reader would walk it as a list.
  EXPECT_EQ(error_of(std::string(kMinimal) + "eval_input:\n  void_values:\n" + alias_bomb("    ")),
            "configs/x.yaml: " + kBombMessage);
}

// yaml-cpp lets an alias sit inside its own anchor (a list that holds itself). The walk that
// refuses duplicate keys recursed without end: a stack overflow (SIGSEGV), now the same one line.
TEST(ConfigLimits, AliasInsideItsOwnAnchorIsRefused) {
  EXPECT_EQ(error_of("a: &a [*a]\n"), "configs/x.yaml: " + kBombMessage);
  EXPECT_EQ(error_of("model: &m {num_classes: 3, again: *m}\n"), "configs/x.yaml: " + kBombMessage);
}

// The count is of nodes as a reader visits them: an anchor's content once per alias.
TEST(ConfigLimits, ExpansionCountsEveryAliasedVisit) {
  using detseg::check_yaml_expansion;
  using detseg::YamlErrorKind;
  // map, key a, [1, 2] (3 nodes), key b, the list of two aliases (1 + 2 x 3): 1 + 1 + 3 + 1 + 7 = 13.
  const YAML::Node doc = YAML::Load("a: &a [1, 2]\nb: [*a, *a]\n");
  EXPECT_NO_THROW(check_yaml_expansion(doc, "d.yaml", YamlErrorKind::kConfig, 13));
  try {
    check_yaml_expansion(doc, "d.yaml", YamlErrorKind::kConfig, 12);
    ADD_FAILURE() << "13 nodes passed a limit of 12";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "d.yaml: YAML aliases expand to more than 12 nodes (an alias bomb?)");
  }
  // A data file's bound is a data error (exit 1), not a config error.
  try {
    check_yaml_expansion(doc, "data.yaml", YamlErrorKind::kData, 12);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError&) {
    ADD_FAILURE() << "a ConfigError for a data file";
  } catch (const detseg::Error& e) {
    EXPECT_STREQ(e.what(), "data.yaml: YAML aliases expand to more than 12 nodes (an alias bomb?)");
  }
}

TEST(ConfigLimits, ConfigsWithAFewAliasesStillLoad) {
  const auto c = parse_config(
      "model: {num_classes: 3, pixel_mean: &m [0.25, 0.5, 0.75], pixel_std: *m}\n"
      "train_input: &data {annotations: /d/train.json, images: /d/images}\n"
      "eval_input: *data\n",
      "configs/x.yaml", {"model.aspect_ratios=[&r 1.0, *r]"});
  ASSERT_EQ(c.model.pixel_std.size(), 3u);
  EXPECT_DOUBLE_EQ(c.model.pixel_std[2], 0.75);
  EXPECT_EQ(c.eval_input.annotations, "/d/train.json");
  EXPECT_EQ(c.eval_input.images, "/d/images");
  EXPECT_EQ(c.model.aspect_ratios, (std::vector<double>{1.0, 1.0}));
}

TEST(ConfigLimits, FilesOverTheSizeLimitAreRefusedUnread) {
  ASSERT_EQ(kMaxYamlBytes, 1 << 20);
  const detseg::testing::TempDir dir("config_limits");
  // Exactly at the limit: loads (a config padded with a comment).
  const std::string at_limit = (dir / "at_limit.yaml").string();
  {
    std::string text = kMinimal;
    text += "# " + std::string(static_cast<size_t>(kMaxYamlBytes) - text.size() - 3, 'x') + "\n";
    ASSERT_EQ(static_cast<int64_t>(text.size()), kMaxYamlBytes);
    std::ofstream(at_limit) << text;
  }
  EXPECT_EQ(load_error(at_limit), "no error");
  // One byte more: refused, naming the file, its size and the limit.
  const std::string over = (dir / "over.yaml").string();
  std::ofstream(over) << kMinimal << "# " << std::string(static_cast<size_t>(kMaxYamlBytes), 'x') << "\n";
  const int64_t size = static_cast<int64_t>(fs::file_size(over));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(load_error(over),
            over + ": " + std::to_string(size) + " bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file");
  EXPECT_LT(seconds_since(t0), kFast);
  // The same for a _base_ file, which is named, and for text handed to parse_config.
  std::ofstream(dir / "child.yaml") << "_base_: over.yaml\nmodel: {num_classes: 3}\n";
  EXPECT_EQ(load_error((dir / "child.yaml").string()),
            over + ": " + std::to_string(size) + " bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file");
  EXPECT_EQ(error_of(std::string(static_cast<size_t>(kMaxYamlBytes) + 1, '\n')),
            "configs/x.yaml: 1048577 bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file");
}

// A document's nodes are counted from the parser's events before yaml-cpp builds its tree (~450
// bytes a node): a 1 MiB flow list of 1s is 524,288 nodes, a 236 MB tree, before the bound.
TEST(ConfigLimits, NodeCountIsBoundedBeforeTheTreeIsBuilt) {
  using detseg::check_yaml_node_count;
  using detseg::YamlErrorKind;
  // map, key a, the list and its two items: 5 nodes; an alias counts once, as the node it is.
  EXPECT_NO_THROW(check_yaml_node_count("a: [1, 2]\n", "d.yaml", YamlErrorKind::kConfig, 5));
  EXPECT_NO_THROW(check_yaml_node_count("a: &x [1, 2]\nb: *x\n", "d.yaml", YamlErrorKind::kConfig, 7));
  try {
    check_yaml_node_count("a:\n  - 1\n  - 2\n", "d.yaml", YamlErrorKind::kConfig, 4);
    ADD_FAILURE() << "5 nodes passed a limit of 4";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "d.yaml:3: a YAML document of more than 4 nodes (each list item, key and value is one); "
                           "detseg reads at most 4 (a pipeline config has a few hundred)");
  }
  // Malformed YAML is the loader's to report, with its position.
  EXPECT_NO_THROW(check_yaml_node_count("a: [1, 2\n", "d.yaml", YamlErrorKind::kConfig, 100));
  EXPECT_EQ(error_of("a: [1, 2\n").rfind("configs/x.yaml:2:1: malformed YAML", 0), 0u) << error_of("a: [1, 2\n");
  // The whole file within the size limit, as a flow list: refused in one line, in milliseconds.
  std::string list = std::string(kMinimal) + "eval_input:\n  void_values: [1";
  while (list.size() + 3 < static_cast<size_t>(kMaxYamlBytes)) list += ",1";
  list += "]\n";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string error = error_of(list);
  EXPECT_EQ(error.rfind("configs/x.yaml:6: a YAML document of more than 40000 nodes", 0), 0u) << error;
  EXPECT_LT(seconds_since(t0), kFast);
  // A YOLO data.yaml with 30,000 class names (ImageNet-21k has 21,843) still counts in bounds.
  std::string names = "names:\n";
  for (int k = 0; k < 30000; ++k) names += "  - class_" + std::to_string(k) + "\n";
  EXPECT_NO_THROW(check_yaml_node_count(names, "data.yaml", YamlErrorKind::kData));
}

// What the bound buys: the largest document accepted, as yaml-cpp's tree, within 20x the 1 MiB
// file limit. Measured with glibc's heap counters (ASan's allocator keeps its own: skipped there).
TEST(ConfigLimits, LargestAcceptedDocumentTakesUnder20TimesTheFileLimit) {
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer's allocator: glibc's heap counters do not see it";
  std::string list = "[1";
  for (int64_t k = 2; k < detseg::kMaxYamlTreeNodes; ++k) list += ",1";
  list += "]";
  ASSERT_NO_THROW(detseg::check_yaml_node_count(list, "d.yaml", detseg::YamlErrorKind::kConfig));
  auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  const int64_t before = heap();
  const YAML::Node tree = YAML::Load(list);
  const int64_t grown = heap() - before;
  ASSERT_EQ(tree.size(), static_cast<size_t>(detseg::kMaxYamlTreeNodes - 1));
  std::printf("[ measured ] the %lld-node tree takes %.1f MB (%.0f bytes a node)\n",
              static_cast<long long>(detseg::kMaxYamlTreeNodes), grown / 1e6,
              static_cast<double>(grown) / static_cast<double>(detseg::kMaxYamlTreeNodes));
  EXPECT_LT(grown, 20 * kMaxYamlBytes);
  EXPECT_GT(grown, detseg::kMaxYamlTreeNodes * 50);  // the counter sees the tree at all
}

TEST(ConfigLimits, BaseFilesHaveTheSameBounds) {
  const detseg::testing::TempDir dir("config_limits");
  std::ofstream(dir / "bomb.yaml") << alias_bomb();
  std::ofstream(dir / "child.yaml") << "_base_: bomb.yaml\nmodel: {num_classes: 3}\n";
  EXPECT_EQ(load_error((dir / "child.yaml").string()), (dir / "bomb.yaml").string() + ": " + kBombMessage);
}

TEST(ConfigLimits, SetValuesHaveTheSameBounds) {
  const std::string set = "model.pixel_mean=" + flow_alias_bomb();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of(kMinimal, {set}), "--set " + set + ": " + kBombMessage);
  EXPECT_LT(seconds_since(t0), kFast);
  const std::string huge = "model.pixel_mean=" + std::string(static_cast<size_t>(kMaxYamlBytes) + 1, '1');
  EXPECT_EQ(error_of(kMinimal, {huge}).substr(huge.size() + 8),
            "1048577 bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file");
}

TEST(ConfigLimits, YoloDataYamlHasTheSameBounds) {
  const detseg::testing::TempDir dir("config_limits");
  const std::string bomb = (dir / "data.yaml").string();
  std::ofstream(bomb) << "names: [a]\ntrain: images\n" << alias_bomb();
  auto yolo_error = [](const std::string& path) -> std::string {
    try {
      detseg::read_yolo(path, detseg::YoloOptions{});
    } catch (const ConfigError&) {
      return "a ConfigError";  // a data file's errors exit 1
    } catch (const detseg::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(yolo_error(bomb), bomb + ": " + kBombMessage);
  const std::string big = (dir / "big.yaml").string();
  std::ofstream(big) << "names: [a]\n# " << std::string(static_cast<size_t>(kMaxYamlBytes), 'x') << "\n";
  EXPECT_EQ(yolo_error(big), big + ": " + std::to_string(fs::file_size(big)) +
                                 " bytes, more than the 1 MiB (1048576 bytes) detseg reads from a YAML file");
}

// A value from --set is blamed on that --set, whole ("key=value"), never on the config file:
// also when it set a section or a list, and when it breaks a rule between keys.
TEST(ConfigOverrides, ErrorsNameTheSetThatCausedThem) {
  EXPECT_EQ(error_of(kMinimal, {"train={batch_size: four}"}),
            "--set train={batch_size: four}: train.batch_size: expected an integer in [1, 4096], got \"four\"");
  EXPECT_EQ(error_of(kMinimal, {"model.pixel_mean=[1, x, 3]"}),
            "--set model.pixel_mean=[1, x, 3]: model.pixel_mean[1]: expected a number in [0, 1], got \"x\"");
  // The demo config's max_dimension is 352: the rule between the two keys fails because of the --set.
  const std::string demo = std::string(DETSEG_SOURCE_DIR) + "/configs/demo/retinanet_r18_bccd.yaml";
  EXPECT_EQ(load_error(demo, {"train.batch_size=2", "model.min_dimension=999"}),
            "--set model.min_dimension=999: model.min_dimension (999) must not exceed model.max_dimension (352)");
  EXPECT_EQ(load_error(demo, {"model.max_dimension=100", "model.min_dimension=999"}),
            "--set model.max_dimension=100, --set model.min_dimension=999: model.min_dimension (999) must not "
            "exceed model.max_dimension (100)");
  // A rule the file breaks by itself still names the file, whatever else is set.
  EXPECT_EQ(error_of("model: {num_classes: 3, min_level: 5, max_level: 4}\n", {"train.batch_size=2"}),
            "configs/x.yaml: model.min_level (5) must not exceed model.max_level (4)");
}

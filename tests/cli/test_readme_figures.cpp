// The demo's figures are written in two places a reader meets: the README's paragraph on the main
// job and the comment heading configs/demo/retinanet_r18_bccd.yaml. Both give the range measured
// under several CPUs' kernel sets (a learnt model's AP moves with the summation order), and they
// must say the same thing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "command_runner.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

using detseg::testing::read_text;

// "AP 0.401-0.425 / AP50 0.715-0.790": lower and upper bound of both figures.
const std::regex kDemoRange(R"(AP (0\.\d{3})-(0\.\d{3}) / AP50 (0\.\d{3})-(0\.\d{3}))");

}  // namespace

TEST(ReadmeFigures, DemoRangeIsTheConfigsRange) {
  const std::string readme = read_text(fs::path(DETSEG_SOURCE_DIR) / "README.md");
  const std::string config = read_text(fs::path(DETSEG_SOURCE_DIR) / "configs/demo/retinanet_r18_bccd.yaml");
  std::smatch in_readme, in_config;
  ASSERT_TRUE(std::regex_search(readme, in_readme, kDemoRange)) << "README.md no longer gives the demo's AP range";
  ASSERT_TRUE(std::regex_search(config, in_config, kDemoRange))
      << "configs/demo/retinanet_r18_bccd.yaml no longer gives the demo's AP range";
  EXPECT_EQ(in_readme.str(0), in_config.str(0));
  EXPECT_LE(std::stod(in_readme.str(1)), std::stod(in_readme.str(2))) << in_readme.str(0);
  EXPECT_LE(std::stod(in_readme.str(3)), std::stod(in_readme.str(4))) << in_readme.str(0);
  // A single figure is what the old text gave; it read as what every machine scores.
  EXPECT_EQ(readme.find("AP 0.420 / AP50 0.715"), std::string::npos);
}

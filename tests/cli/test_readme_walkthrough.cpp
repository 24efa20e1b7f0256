// The README's "Train on your own data" walk-through, run as written: the commands between its
// <!-- walkthrough --> markers, in a scratch folder holding a Pascal VOC set made from BCCD images,
// with the step count cut from 1000 to 2 (the only change made to the text).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "command_runner.h"
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces the one occurrence of `from` (the test fails if the README no longer has it).
void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "README walk-through no longer contains: " << from;
  text.replace(at, from.size(), to);
}

// BCCD's first `count` images of a VOC split into my_cells/, as a labelling tool would leave them.
void copy_voc_split(const fs::path& voc, const fs::path& out, const std::string& split, size_t count) {
  std::istringstream ids(read_all(voc / "ImageSets" / "Main" / (split + ".txt")));
  std::ofstream list(out / "ImageSets" / "Main" / (split + ".txt"));
  std::string id;
  for (size_t n = 0; n < count && ids >> id; ++n) {
    fs::copy_file(voc / "Annotations" / (id + ".xml"), out / "Annotations" / (id + ".xml"));
    fs::copy_file(voc / "JPEGImages" / (id + ".jpg"), out / "JPEGImages" / (id + ".jpg"));
    list << id << "\n";
  }
}

}  // namespace

TEST(ReadmeWalkthrough, FromAVocFolderToPredictions) {
  const std::string readme = read_all(fs::path(DETSEG_SOURCE_DIR) / "README.md");
  const std::string open = "<!-- walkthrough -->\n```sh\n", close = "```\n<!-- /walkthrough -->";
  const size_t begin = readme.find(open), end = readme.find(close);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::string script = readme.substr(begin + open.size(), end - begin - open.size());
  replace_once(script, "num_steps: 1000", "num_steps: 2");
  replace_once(script, "ckpt-1000.dsckpt", "ckpt-2.dsckpt");

  const fs::path dir = fs::temp_directory_path() / ("detseg_readme_walkthrough_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const char* sub : {"Annotations", "JPEGImages", "ImageSets/Main"}) fs::create_directories(dir / "my_cells" / sub);
  const fs::path voc = fs::path(DETSEG_SHARED_DIR) / "data" / "bccd" / "BCCD";
  copy_voc_split(voc, dir / "my_cells", "train", 8);
  copy_voc_split(voc, dir / "my_cells", "val", 4);
  // The walk-through runs from the repository root: build/detseg and configs/ as they are there.
  fs::create_directory_symlink(fs::path(DETSEG_BINARY).parent_path(), dir / "build");
  fs::create_directory_symlink(fs::path(DETSEG_SOURCE_DIR) / "configs", dir / "configs");
  std::ofstream(dir / "walkthrough.sh") << script;

  const detseg::testing::CommandRun r =
      detseg::testing::run_command("cd " + dir.string() + " && bash -euo pipefail walkthrough.sh");
  ASSERT_EQ(r.code, 0) << r.output;
  const fs::path run = dir / "runs" / "my_cells";
  EXPECT_TRUE(fs::exists(run / "ckpt-2.dsckpt")) << r.output;
  EXPECT_NE(read_all(dir / "my_cells.resolved.yaml").find("format: \"voc\""), std::string::npos);
  EXPECT_NE(read_all(run / "train.log").find("training retinanet on cpu for 2 steps"), std::string::npos);
  EXPECT_NE(r.output.find("evaluation of step 2:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ]"), std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::exists(run / "eval" / "detections-2.json")) << r.output;
  EXPECT_TRUE(fs::exists(run / "predictions" / "detections.json")) << r.output;
  size_t drawn = 0;
  for (const auto& entry : fs::directory_iterator(run / "predictions")) drawn += entry.path().extension() == ".png";
  EXPECT_EQ(drawn, 12u);  // every image of my_cells/JPEGImages
  EXPECT_TRUE(fs::exists(run / "plots" / "loss.png")) << r.output;
  fs::remove_all(dir);
}

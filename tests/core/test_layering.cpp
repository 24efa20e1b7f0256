// The folders under detseg/ include each other one way only (docs/architecture.md): the graph of
// `#include "detseg/<folder>/..."` between folders has no cycle. (That detseg_base stays
// torch-free is checked by its build: it compiles without LibTorch's headers.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "test_paths.h"

namespace fs = std::filesystem;

namespace {

// folder -> folders its files include (by the first path component under detseg/).
std::map<std::string, std::set<std::string>> folder_includes() {
  const fs::path root = fs::path(DETSEG_SOURCE_DIR) / "detseg";
  const std::regex include(R"re(#include "detseg/([a-z_]+)/)re");
  std::map<std::string, std::set<std::string>> edges;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu")) continue;
    const std::string folder = *fs::relative(entry.path(), root).begin();
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (auto it = std::sregex_iterator(s.begin(), s.end(), include); it != std::sregex_iterator(); ++it)
      if ((*it)[1] != folder) edges[folder].insert((*it)[1]);
  }
  return edges;
}

}  // namespace

TEST(Layering, FoldersIncludeEachOtherOneWayOnly) {
  const auto edges = folder_includes();
  ASSERT_GT(edges.size(), 10u);
  // Depth-first search; a folder met again while still on the path closes a cycle.
  std::map<std::string, int> state;  // 0 new, 1 on the path, 2 done
  std::vector<std::string> path;
  std::string cycle;
  std::function<void(const std::string&)> visit = [&](const std::string& folder) {
    state[folder] = 1;
    path.push_back(folder);
    auto it = edges.find(folder);
    if (it != edges.end())
      for (const std::string& next : it->second) {
        if (!cycle.empty()) break;
        if (state[next] == 1) {
          for (auto p = std::find(path.begin(), path.end(), next); p != path.end(); ++p) cycle += *p + " -> ";
          cycle += next;
        } else if (state[next] == 0) {
          visit(next);
        }
      }
    path.pop_back();
    state[folder] = 2;
  };
  for (const auto& [folder, unused] : edges)
    if (state[folder] == 0) visit(folder);
  EXPECT_TRUE(cycle.empty()) << "include cycle between folders: " << cycle;
}

// Implements: COCO bbox evaluation against pycocotools' own numbers for the shared reference cases
// (../shared/coco_cases/*/ref.json): all 12 stats and every per-category AP. The issue asks for
// 1e-6; the implementation is bit-exact on these cases, so 1e-12 is asserted.
#include <gtest/gtest.h>

#include "detseg/core/json.h"
#include "detseg/data/readers/coco.h"
#include "detseg/eval/coco_eval.h"
#include "test_paths.h"

using namespace detseg;

namespace {

struct Reference {
  std::vector<double> stats;
  std::vector<std::pair<int64_t, double>> per_category_ap;
};

Reference read_reference(const std::string& path) {
  JsonDocument doc;
  load_json(path, doc);
  Reference ref;
  for (auto v : doc.root["stats"].get_array()) ref.stats.push_back(double(v));
  for (auto field : doc.root["per_category_ap"].get_object())
    ref.per_category_ap.emplace_back(std::stoll(std::string(field.key)), double(field.value));
  return ref;
}

void check_case(const std::string& name, int threads = 0) {
  const std::string dir = std::string(DETSEG_SHARED_DIR) + "/coco_cases/" + name + "/";
  CocoDataset gt = read_coco(dir + "gt.json");
  CocoDataset dt = read_coco_results(dir + "dt.json", gt);
  Reference ref = read_reference(dir + "ref.json");
  CocoEvalResult result = coco_evaluate(gt, dt, CocoEvalParams(), threads);
  ASSERT_EQ(ref.stats.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(result.stats[i], ref.stats[i], 1e-12) << name << " stat " << i;
  ASSERT_EQ(result.per_category_ap.size(), ref.per_category_ap.size());
  for (const auto& [id, ap] : ref.per_category_ap) {
    auto it = std::find(result.params.category_ids.begin(), result.params.category_ids.end(), id);
    ASSERT_NE(it, result.params.category_ids.end()) << "category " << id;
    EXPECT_NEAR(result.per_category_ap[it - result.params.category_ids.begin()], ap, 1e-12)
        << name << " category " << id;
  }
}

}  // namespace

TEST(CocoEvalCases, SmallMatchesPycocotools) { check_case("case_small"); }
TEST(CocoEvalCases, MediumMatchesPycocotools) { check_case("case_medium"); }
TEST(CocoEvalCases, LargeMatchesPycocotools) { check_case("case_large"); }

// The medium case (~9.5k boxes) is split over at most two threads, the small one (~1.1k) runs on
// one whatever is asked (a thread costs more than it saves there); any count gives the same stats.
TEST(CocoEvalCases, EveryThreadCountMatchesPycocotools) {
  for (int threads : {1, 3, 8}) {
    check_case("case_small", threads);
    check_case("case_medium", threads);
  }
}


// postprocess.nms: per-class, class-agnostic and soft-NMS on hand-made boxes whose IoUs are worked
// out in the comments, through select_detections (dense detectors) and multiclass_nms (Faster R-CNN).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "detseg/ops/nms.h"
#include "detseg/postprocess/nms_choice.h"

using namespace detseg;

namespace {

// A (class 0, .9) and B (class 1, .8) overlap with IoU 81/119 = 0.68; D (class 0, .85) lies in A
// with IoU 90/100 = 0.9; C (class 0, .7) overlaps nothing.
struct Scene {
  at::Tensor boxes = at::tensor({0.f, 0.f, 10.f, 10.f, 1.f, 1.f, 11.f, 11.f, 20.f, 20.f, 30.f, 30.f, 0.f, 0.f, 10.f, 9.f}).view({4, 4});
  at::Tensor scores = at::tensor({0.9f, 0.8f, 0.7f, 0.85f});
  at::Tensor classes = at::tensor({0, 1, 0, 0}, at::kLong);
};

std::vector<int64_t> ints(const at::Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t[i].item<int64_t>();
  return v;
}

NmsChoice choice(NmsMethod method) {
  NmsChoice c;
  c.method = method;
  c.iou_threshold = 0.5;
  c.soft_sigma = 0.5;
  c.score_threshold = 0.05;
  return c;
}

}  // namespace

TEST(NmsChoice, PerClassKeepsOverlapsAcrossClasses) {
  Scene s;
  auto kept = select_detections(s.boxes, s.scores, s.classes, choice(NmsMethod::kPerClass));
  EXPECT_EQ(ints(kept.indices), (std::vector<int64_t>{0, 1, 2}));  // D goes (0.9 with A), B stays
}

TEST(NmsChoice, ClassAgnosticSuppressesAcrossClasses) {
  Scene s;
  auto kept = select_detections(s.boxes, s.scores, s.classes, choice(NmsMethod::kClassAgnostic));
  EXPECT_EQ(ints(kept.indices), (std::vector<int64_t>{0, 2}));  // A removes D and B
}

TEST(NmsChoice, SoftDecaysInsteadOfRemoving) {
  Scene s;
  auto kept = select_detections(s.boxes, s.scores, s.classes, choice(NmsMethod::kSoft));
  // D: 0.85 * exp(-0.9^2 / (2 * 0.5)) = 0.3782; nothing else overlaps within its class.
  EXPECT_EQ(ints(kept.indices), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_NEAR(kept.scores[3].item<double>(), 0.85 * std::exp(-0.81), 1e-6);
  EXPECT_NEAR(kept.scores[1].item<double>(), 0.8, 1e-7);
  // The limit keeps the best detections.
  NmsChoice two = choice(NmsMethod::kSoft);
  two.max_detections = 2;
  EXPECT_EQ(ints(select_detections(s.boxes, s.scores, s.classes, two).indices), (std::vector<int64_t>{0, 1}));
}

TEST(NmsChoice, MulticlassNmsTakesTheSameChoice) {
  // The scene as Faster R-CNN's second stage sees it: every box scored for 2 classes.
  Scene s;
  at::Tensor scores = at::zeros({4, 2});
  for (int64_t i = 0; i < 4; ++i) scores[i][s.classes[i].item<int64_t>()] = s.scores[i];
  MultiClassNmsOptions options;
  options.score_threshold = 0.05;
  apply_nms_choice(choice(NmsMethod::kClassAgnostic), options);
  Boxes agnostic = multiclass_nms(s.boxes, scores, options);
  EXPECT_EQ(ints(agnostic.field("indices")), (std::vector<int64_t>{0, 2}));
  apply_nms_choice(choice(NmsMethod::kPerClass), options);
  EXPECT_EQ(ints(multiclass_nms(s.boxes, scores, options).field("indices")), (std::vector<int64_t>{0, 1, 2}));
  apply_nms_choice(choice(NmsMethod::kSoft), options);
  Boxes soft = multiclass_nms(s.boxes, scores, options);
  EXPECT_EQ(ints(soft.field("indices")), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_NEAR(soft.scores[3].item<double>(), 0.85 * std::exp(-0.81), 1e-6);
}

// Implements: tests of nms, batched_nms, soft_nms, multiclass NMS and top-k with hand-worked
// cases, a brute-force cross-check of the grid kernel, and bad input.
#include <cmath>

#include "detseg/core/error.h"
#include "detseg/ops/nms.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

namespace {
// Boxes 0 and 3 are identical with equal scores; box 1 overlaps box 0 at IoU 81/119 = 0.68.
at::Tensor four_boxes() { return F({0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30, 0, 0, 10, 10}, {4, 4}); }
at::Tensor four_scores() { return F({0.9f, 0.8f, 0.7f, 0.9f}, {4}); }

// The textbook all-pairs greedy NMS, with torchvision's float arithmetic.
std::vector<int64_t> brute_force_nms(const at::Tensor& boxes, const at::Tensor& scores, float thr) {
  auto order = to_vec(std::get<1>(scores.sort(true, 0, true)));
  auto b = boxes.contiguous();
  const float* p = b.data_ptr<float>();
  std::vector<int64_t> kept;
  std::vector<char> dead(order.size(), 0);
  for (size_t a = 0; a < order.size(); ++a) {
    if (dead[a]) continue;
    const int64_t i = order[a];
    kept.push_back(i);
    const float ia = (p[4 * i + 2] - p[4 * i]) * (p[4 * i + 3] - p[4 * i + 1]);
    for (size_t c = a + 1; c < order.size(); ++c) {
      const int64_t j = order[c];
      const float ja = (p[4 * j + 2] - p[4 * j]) * (p[4 * j + 3] - p[4 * j + 1]);
      float w = std::max(0.f, std::min(p[4 * i + 2], p[4 * j + 2]) - std::max(p[4 * i], p[4 * j]));
      float h = std::max(0.f, std::min(p[4 * i + 3], p[4 * j + 3]) -
                                  std::max(p[4 * i + 1], p[4 * j + 1]));
      float inter = w * h;
      if (inter / (ia + ja - inter) > static_cast<double>(thr)) dead[c] = 1;
    }
  }
  return kept;
}
}  // namespace

TEST(Nms, HandWorkedThresholdsAndTies) {
  EXPECT_EQ(to_vec(nms(four_boxes(), four_scores(), 0.5)), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(to_vec(nms(four_boxes(), four_scores(), 0.7)), (std::vector<int64_t>{0, 1, 2}));
  // IoU 1 is not > 1: nothing is suppressed; equal scores keep the lower index first.
  EXPECT_EQ(to_vec(nms(four_boxes(), four_scores(), 1.0)), (std::vector<int64_t>{0, 3, 1, 2}));
}

TEST(Nms, AllSuppressedEmptyAndDegenerate) {
  auto same = F({1, 1, 5, 5}, {1, 4}).repeat({5, 1});
  EXPECT_EQ(to_vec(nms(same, F({0.1f, 0.5f, 0.3f, 0.2f, 0.4f}, {5}), 0.5)),
            (std::vector<int64_t>{1}));
  auto none = nms(at::zeros({0, 4}), at::zeros({0}), 0.5);
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.scalar_type(), at::kLong);
  // Zero-area boxes have IoU 0/0 with each other, which never exceeds the threshold.
  auto points = F({2, 2, 2, 2, 2, 2, 2, 2}, {2, 4});
  EXPECT_EQ(to_vec(nms(points, F({0.2f, 0.9f}, {2}), 0.5)), (std::vector<int64_t>{1, 0}));
  // Double precision works too.
  EXPECT_EQ(to_vec(nms(four_boxes().to(at::kDouble), four_scores().to(at::kDouble), 0.5)),
            (std::vector<int64_t>{0, 2}));
}

TEST(Nms, BadInput) {
  EXPECT_THROW(nms(F({0, 0, 1}, {1, 3}), F({1}, {1}), 0.5), Error);
  EXPECT_THROW(nms(F({0, 0, NAN, 1}, {1, 4}), F({1}, {1}), 0.5), Error);
  EXPECT_THROW(nms(F({0, 0, 1, 1}, {1, 4}), F({NAN}, {1}), 0.5), Error);
  EXPECT_THROW(nms(four_boxes(), F({1, 2}, {2}), 0.5), Error);
  EXPECT_THROW(nms(four_boxes().to(at::kLong), four_scores(), 0.5), Error);
  EXPECT_THROW(nms(four_boxes(), four_scores(), NAN), Error);
}

TEST(Nms, GridKernelEqualsAllPairs) {
  at::manual_seed(11);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t n = 3000;
    auto xy = at::rand({n, 2}) * (trial % 2 ? 300.f : 2000.f);
    auto wh = at::rand({n, 2}) * (trial < 2 ? 20.f : 120.f) + 0.5f;
    auto boxes = at::cat({xy, xy + wh}, 1);
    if (trial >= 4) boxes.slice(0, 0, 30).mul_(0.1).add_(at::tensor({0.f, 0.f, 1500.f, 1500.f}));
    if (trial == 5) boxes.slice(0, 100, 200).copy_(boxes.slice(0, 300, 400));  // duplicates
    auto scores = at::rand({n});
    for (float thr : {0.0f, 0.3f, 0.5f, 0.9f})
      EXPECT_EQ(to_vec(nms(boxes, scores, thr)), brute_force_nms(boxes, scores, thr))
          << "trial " << trial << " thr " << thr;
  }
}

TEST(BatchedNms, PerClassSuppression) {
  auto boxes = F({0, 0, 10, 10, 0, 0, 10, 10, 1, 1, 11, 11}, {3, 4});
  auto scores = F({0.9f, 0.8f, 0.7f}, {3});
  EXPECT_EQ(to_vec(batched_nms(boxes, scores, L({0, 1, 0}), 0.5)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(to_vec(batched_nms(boxes, scores, L({0, 1, 2}), 0.5)),
            (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(to_vec(batched_nms(boxes, scores, L({5, 5, 5}), 0.5)), (std::vector<int64_t>{0}));
  EXPECT_EQ(batched_nms(at::zeros({0, 4}), at::zeros({0}), at::zeros({0}, at::kLong), 0.5).numel(), 0);
  EXPECT_THROW(batched_nms(boxes, scores, F({0, 1, 0}, {3}), 0.5), Error);
  EXPECT_THROW(batched_nms(boxes, scores, L({0, 1}), 0.5), Error);
}

TEST(SoftNms, LinearAndGaussianDecay) {
  auto boxes = F({0, 0, 10, 10, 0, 0, 10, 12, 50, 50, 60, 60}, {3, 4});  // IoU(0, 1) = 5/6
  auto scores = F({0.9f, 0.8f, 0.5f}, {3});
  SoftNmsOptions lin;
  lin.method = SoftNmsMethod::kLinear;
  lin.iou_threshold = 0.3;
  auto r = soft_nms(boxes, scores, lin);
  EXPECT_EQ(to_vec(r.indices), (std::vector<int64_t>{0, 2, 1}));
  expect_close(r.scores, F({0.9f, 0.5f, 0.8f / 6}, {3}));
  SoftNmsOptions gauss;  // sigma 0.5, no hard suppression below iou_threshold
  gauss.iou_threshold = 1.0;
  auto g = soft_nms(boxes, scores, gauss);
  EXPECT_EQ(to_vec(g.indices), (std::vector<int64_t>{0, 2, 1}));
  expect_close(g.scores, F({0.9f, 0.5f, 0.8f * std::exp(-0.5f * 25.f / 36.f / 0.5f)}, {3}));
  gauss.score_threshold = 0.45;  // the decayed box drops out
  EXPECT_EQ(to_vec(soft_nms(boxes, scores, gauss).indices), (std::vector<int64_t>{0, 2}));
  gauss.max_output = 1;
  EXPECT_EQ(to_vec(soft_nms(boxes, scores, gauss).indices), (std::vector<int64_t>{0}));
  EXPECT_EQ(soft_nms(at::zeros({0, 4}), at::zeros({0}), lin).indices.numel(), 0);
}

TEST(MultiClassNms, ThresholdsLimitsClipAndMasks) {
  auto boxes = F({0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60}, {3, 4});
  auto scores = F({0.9f, 0.1f, 0.8f, 0.7f, 0.05f, 0.6f}, {3, 2});
  auto masks = at::arange(3, at::kFloat).view({3, 1, 1}).expand({3, 2, 2}).contiguous();
  MultiClassNmsOptions o;
  o.score_threshold = 0.2;
  o.iou_threshold = 0.5;
  auto d = multiclass_nms(boxes, scores, o, masks);
  expect_close(d.scores, F({0.9f, 0.7f, 0.6f}, {3}));
  EXPECT_EQ(to_vec(d.classes), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(to_vec(d.field("indices")), (std::vector<int64_t>{0, 1, 2}));
  expect_close(d.masks.select(1, 0).select(1, 0), F({0, 1, 2}, {3}));
  o.max_total = 2;
  EXPECT_EQ(multiclass_nms(boxes, scores, o).size(), 2);
  o.max_total = 100;
  o.max_per_class = 1;
  EXPECT_EQ(to_vec(multiclass_nms(boxes, scores, o).field("indices")),
            (std::vector<int64_t>{0, 1}));
  o.max_per_class = 100;
  o.clip_window = Window{0, 0, 50, 50};  // box 2 clips to nothing and is dropped
  o.change_coordinate_frame = true;
  auto c = multiclass_nms(boxes, scores, o);
  EXPECT_EQ(c.size(), 2);
  expect_close(c.boxes, F({0, 0, 0.2f, 0.2f, 0.02f, 0.02f, 0.22f, 0.22f}, {2, 4}));
  // Per-class boxes [N, C, 4].
  auto per_class = at::stack({boxes, boxes + 100}, 1);
  MultiClassNmsOptions p;
  p.score_threshold = 0.2;
  auto pc = multiclass_nms(per_class, scores, p);
  expect_close(pc.boxes[1], F({101, 101, 111, 111}, {4}));
  // Soft-NMS per class keeps box 1 of class 0 with a decayed score.
  p.soft_nms_sigma = 0.5;
  p.iou_threshold = 1.0;
  EXPECT_EQ(multiclass_nms(boxes, scores, p).size(), 4);
  EXPECT_THROW(multiclass_nms(boxes, scores.slice(0, 0, 2), p), Error);
}

TEST(MultiClassNms, BatchedWithValidCounts) {
  auto boxes = F({0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60}, {3, 4});
  auto scores = F({0.9f, 0.1f, 0.8f, 0.7f, 0.05f, 0.6f}, {3, 2});
  MultiClassNmsOptions o;
  o.score_threshold = 0.2;
  o.max_total = 5;
  auto d = batch_multiclass_nms(at::stack({boxes, boxes}), at::stack({scores, scores}), o, L({3, 1}));
  EXPECT_EQ(to_vec(d.num_detections), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(d.boxes.sizes(), (at::IntArrayRef{2, 5, 4}));
  expect_close(d.scores[1], F({0.9f, 0, 0, 0, 0}, {5}));
  o.max_total = 0;
  EXPECT_THROW(batch_multiclass_nms(at::stack({boxes}), at::stack({scores}), o), Error);
}

TEST(TopK, AcrossAnchorsAndClasses) {
  auto s = F({0.1f, 0.9f, 0.5f, 0.2f, 0.3f, 0.8f}, {1, 3, 2});
  auto t = select_top_k(s, 3);
  expect_close(t.scores, F({0.9f, 0.8f, 0.5f}, {1, 3}));
  EXPECT_EQ(to_vec(t.anchor_indices), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(to_vec(t.classes), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(select_top_k(s, 5000).scores.size(1), 6);  // capped at N * K
  auto levels = select_top_k({s.slice(1, 0, 2), s.slice(1, 2, 3)}, 2);
  EXPECT_EQ(to_vec(levels.anchor_indices), (std::vector<int64_t>{0, 2}));
  EXPECT_THROW(select_top_k(s.view({6}), 3), Error);
}

// Implements: tests of the argmax matcher, target assigner, EfficientDet anchor labeler,
// balanced samplers and the hard example miner.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "detseg/core/error.h"
#include "detseg/ops/anchors.h"
#include "detseg/ops/hard_example_miner.h"
#include "detseg/ops/matcher.h"
#include "detseg/ops/sampler.h"
#include "detseg/ops/target_assigner.h"
#include "ops/ops_test_util.h"

using namespace detseg;
using namespace detseg::testing;

namespace {
// Columns: clear match, band, below, exactly matched threshold, exactly unmatched threshold,
// just below unmatched.
at::Tensor similarity() {
  return F({0.6f, 0.45f, 0.2f, 0.5f, 0.4f, 0.39f,  //
            0.1f, 0.3f, 0.35f, 0.45f, 0.0f, 0.0f},
           {2, 6});
}
ArgMaxMatcherOptions thresholds(double m, double u) {
  ArgMaxMatcherOptions o;
  o.matched_threshold = m;
  o.unmatched_threshold = u;
  return o;
}
}  // namespace

TEST(ArgMaxMatcher, ThresholdBoundaries) {
  auto o = thresholds(0.5, 0.4);
  // >= matched -> row; [unmatched, matched) -> ignored; < unmatched -> unmatched.
  EXPECT_EQ(to_vec(argmax_match(similarity(), o)), (std::vector<int64_t>{0, -2, -1, 0, -2, -1}));
  o.negatives_lower_than_unmatched = false;  // band and low swap roles
  EXPECT_EQ(to_vec(argmax_match(similarity(), o)), (std::vector<int64_t>{0, -1, -2, 0, -1, -2}));
  auto equal = thresholds(0.5, 0.5);  // no band
  EXPECT_EQ(to_vec(argmax_match(similarity(), equal)),
            (std::vector<int64_t>{0, -1, -1, 0, -1, -1}));
  ArgMaxMatcherOptions none;
  none.matched_threshold.reset();  // every column takes its argmax row
  EXPECT_EQ(to_vec(argmax_match(similarity(), none)), (std::vector<int64_t>{0, 0, 1, 0, 0, 0}));
  EXPECT_THROW(argmax_match(similarity(), thresholds(0.4, 0.5)), ConfigError);
}

TEST(ArgMaxMatcher, ForceMatchEachRow) {
  auto o = thresholds(0.5, 0.4);
  o.force_match_for_each_row = true;
  // Row 1's best column is 3 (0.45): forced to row 1 even though row 0 matched it at 0.5.
  EXPECT_EQ(to_vec(argmax_match(similarity(), o)), (std::vector<int64_t>{0, -2, -1, 1, -2, -1}));
  // Two rows wanting the same column: the lowest row wins; argmax ties pick the lowest row.
  auto tie = F({0.3f, 0.1f, 0.3f, 0.2f}, {2, 2});
  EXPECT_EQ(to_vec(argmax_match(tie, o)), (std::vector<int64_t>{0, -1}));
  // Invalid (padding) rows never match.
  auto valid = L({1, 0}).to(at::kBool);
  EXPECT_EQ(to_vec(argmax_match(similarity(), o, valid)),
            (std::vector<int64_t>{0, -2, -1, 0, -2, -1}));
}

TEST(ArgMaxMatcher, EmptyAndBadInput) {
  auto o = thresholds(0.5, 0.4);
  o.force_match_for_each_row = true;
  EXPECT_EQ(to_vec(argmax_match(at::zeros({0, 3}), o)), (std::vector<int64_t>{-1, -1, -1}));
  EXPECT_EQ(argmax_match(at::zeros({2, 0}), o).numel(), 0);
  EXPECT_THROW(argmax_match(F({NAN, 0.5f}, {1, 2}), o), Error);
  EXPECT_THROW(argmax_match(at::zeros({3}), o), Error);
}

TEST(GatherByMatch, PicksRowsAndDefaults) {
  auto rows = F({10, 20, 30}, {3});
  auto got = gather_by_match(rows, L({2, -1, 0, -2}), at::full({}, -1.f), at::full({}, -5.f));
  expect_close(got, F({30, -1, 10, -5}, {4}));
  EXPECT_THROW(gather_by_match(rows, L({3}), at::zeros({}), at::zeros({})), Error);
}

TEST(TargetAssigner, ClassAndBoxTargetsAndWeights) {
  auto anchors = F({0, 0, 10, 10, 20, 20, 30, 30, 0, 0, 10, 25}, {3, 4});
  auto gt = F({0, 0, 10, 12}, {1, 4});  // IoU 0.833 with anchor 0, 0 with 1, 0.48 with 2
  TargetAssignerOptions o;
  o.matcher = thresholds(0.5, 0.3);
  o.negative_class_weight = 0.5;
  auto t = assign_targets(anchors, gt, L({3}), at::zeros({}, at::kLong), o, F({0.8f}, {1}));
  EXPECT_EQ(to_vec(t.match), (std::vector<int64_t>{0, -1, -2}));
  EXPECT_EQ(to_vec(t.cls_targets), (std::vector<int64_t>{3, 0, 0}));
  expect_close(t.cls_weights, F({0.8f, 0.5f, 0}, {3}));
  expect_close(t.reg_weights, F({0.8f, 0, 0}, {3}));
  expect_close(t.reg_targets, F({0.1f, 0, std::log(1.2f), 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 4}));
  // One-hot labels with a background row.
  auto onehot = F({0, 0, 1}, {1, 3});
  auto t2 = assign_targets(anchors, gt, onehot, F({1, 0, 0}, {3}), o);
  expect_close(t2.cls_targets, F({0, 0, 1, 1, 0, 0, 1, 0, 0}, {3, 3}));
  // No ground truth: everything unmatched, zero box targets.
  auto t3 = assign_targets(anchors, at::zeros({0, 4}), at::zeros({0}, at::kLong),
                           at::zeros({}, at::kLong), o);
  EXPECT_EQ(to_vec(t3.match), (std::vector<int64_t>{-1, -1, -1}));
  expect_close(t3.reg_targets, at::zeros({3, 4}));
  EXPECT_THROW(assign_targets(anchors, gt, L({1, 2}), at::zeros({}, at::kLong), o), Error);
}

TEST(AnchorLabeler, DenseTargetsPerLevel) {
  auto ao = two_level_anchor_options();
  auto anchors = multilevel_anchors(ao);
  AnchorLabelerOptions lo;
  lo.unmatched_threshold = 0.2;  // level-4 anchor 0 overlaps the box at IoU 0.25 -> ignored
  auto d = label_anchors(anchors, level_sizes(ao), 1, F({0, 0, 8, 8}, {1, 4}), L({2}), lo);
  ASSERT_EQ(d.cls_targets.size(), 2u);
  EXPECT_EQ(d.cls_targets[0].sizes(), (at::IntArrayRef{4, 4, 1}));
  EXPECT_EQ(d.box_targets[1].sizes(), (at::IntArrayRef{2, 2, 4}));
  EXPECT_EQ(d.cls_targets[0][0][0][0].item<int64_t>(), 2);
  EXPECT_EQ(d.cls_targets[0][0][1][0].item<int64_t>(), -1);
  EXPECT_EQ(d.cls_targets[1][0][0][0].item<int64_t>(), -2);
  EXPECT_EQ(d.cls_targets[1][1][1][0].item<int64_t>(), -1);
  EXPECT_EQ(d.num_positives.item<float>(), 1.0f);
  expect_close(d.box_targets[0][0][0], at::zeros({4}));
  // A box matching no anchor above threshold is still force-matched to its best anchor.
  auto small = label_anchors(anchors, level_sizes(ao), 1, F({0, 0, 2, 2}, {1, 4}), L({0}));
  EXPECT_EQ(small.num_positives.item<float>(), 1.0f);
  EXPECT_EQ(small.cls_targets[0][0][0][0].item<int64_t>(), 0);
  EXPECT_THROW(label_anchors(anchors, {{4, 4}}, 1, F({0, 0, 8, 8}, {1, 4}), L({2})), Error);
}

namespace {
at::Generator seeded(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }
}  // namespace

TEST(BalancedSampler, FractionsAndFill) {
  auto indicator = at::ones({100}, at::kBool);
  auto labels = at::arange(100) < 10;  // 10 positives
  BalancedSamplerOptions o;
  o.positive_fraction = 0.25;
  o.batch_size = 16;
  auto m = sample_balanced(indicator, labels, o, seeded(1));
  EXPECT_EQ(m.sum().item<int64_t>(), 16);
  EXPECT_EQ((m & labels).sum().item<int64_t>(), 4);
  // Only 2 positives: the batch is filled with negatives.
  auto few = at::arange(100) < 2;
  auto m2 = sample_balanced(indicator, few, o, seeded(1));
  EXPECT_EQ((m2 & few).sum().item<int64_t>(), 2);
  EXPECT_EQ(m2.sum().item<int64_t>(), 16);
  // Ineligible rows are never picked.
  auto half = at::arange(100) % 2 == 0;
  auto m3 = sample_balanced(half, labels, o, seeded(2));
  EXPECT_EQ((m3 & half.logical_not()).sum().item<int64_t>(), 0);
  // Without a batch size: all positives, negatives capped at ratio (0.75 / 0.25) * positives.
  o.batch_size.reset();
  auto m4 = sample_balanced(indicator, labels, o, seeded(3));
  EXPECT_EQ((m4 & labels).sum().item<int64_t>(), 10);
  EXPECT_EQ(m4.sum().item<int64_t>(), 40);
}

TEST(BalancedSampler, DeterministicWithSeed) {
  auto indicator = at::ones({500}, at::kBool);
  auto labels = at::arange(500) % 7 == 0;
  BalancedSamplerOptions o;
  auto a = sample_balanced(indicator, labels, o, seeded(42));
  auto b = sample_balanced(indicator, labels, o, seeded(42));
  auto c = sample_balanced(indicator, labels, o, seeded(43));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_FALSE(at::equal(a, c));
  EXPECT_THROW(sample_balanced(indicator, labels.slice(0, 0, 3), o), Error);
  o.positive_fraction = 1.5;
  EXPECT_THROW(sample_balanced(indicator, labels, o), ConfigError);
}

TEST(BalancedSampler, StaticShape) {
  auto indicator = at::arange(20) < 12;  // only 12 eligible rows
  auto labels = at::arange(20) < 3;
  BalancedSamplerOptions o;
  o.positive_fraction = 0.5;
  o.batch_size = 16;
  auto s = sample_balanced_static(indicator, labels, o, seeded(5));
  EXPECT_EQ(s.indices.size(0), 16);
  EXPECT_EQ(s.num_positives, 3);
  EXPECT_EQ(s.num_valid, 12);
  auto idx = to_vec(s.indices);
  for (int i = 0; i < 3; ++i) EXPECT_LT(idx[i], 3);
  for (int i = 12; i < 16; ++i) EXPECT_EQ(idx[i], -1);
  EXPECT_EQ(s.mask.sum().item<int64_t>(), 12);
}

TEST(HardExampleMiner, NmsOverLossesAndNegativeCap) {
  // Boxes 0 and 1 overlap (IoU 100/110); 2 and 3 are apart.
  std::vector<at::Tensor> boxes{F({0, 0, 10, 10, 0, 0, 10, 11, 20, 20, 30, 30, 40, 40, 50, 50}, {4, 4})};
  auto cls = F({5, 4, 3, 1}, {1, 4}).requires_grad_(true);
  auto loc = at::zeros({1, 4});
  HardExampleMinerOptions o;
  o.loss_type = HardMiningLoss::kClassification;
  o.iou_threshold = 0.5;
  o.num_hard_examples = 2;
  auto r = mine_hard_examples(loc, cls, boxes, o);
  EXPECT_EQ(to_vec(r.selected[0]), (std::vector<int64_t>{0, 2}));
  EXPECT_FLOAT_EQ(r.classification_loss.item<float>(), 8.0f);
  r.classification_loss.backward();
  expect_close(cls.grad(), F({1, 0, 1, 0}, {1, 4}));
  // With matches: one positive (anchor 0), negatives capped at max(min_neg, ratio * 1).
  o.num_hard_examples = 0;
  o.max_negatives_per_positive = 1.0;
  std::vector<at::Tensor> matches{L({0, -1, -1, -1})};
  auto r2 = mine_hard_examples(loc, cls.detach(), boxes, o, matches);
  EXPECT_EQ(to_vec(r2.selected[0]), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(r2.num_positives[0], 1);
  EXPECT_EQ(r2.num_negatives[0], 1);
  o.min_negatives_per_image = 2;
  auto r3 = mine_hard_examples(loc, cls.detach(), boxes, o, matches);
  EXPECT_EQ(to_vec(r3.selected[0]), (std::vector<int64_t>{0, 2, 3}));
  // kBoth ranks by 0.05 * cls + 0.06 * loc.
  o = HardExampleMinerOptions{};
  o.iou_threshold = 0.5;
  auto loc2 = F({0, 0, 0, 1000}, {1, 4});
  auto r4 = mine_hard_examples(loc2, cls.detach(), boxes, o);
  EXPECT_EQ(to_vec(r4.selected[0]), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_THROW(mine_hard_examples(loc2, cls.detach().view({4, 1}), boxes, o), Error);
}

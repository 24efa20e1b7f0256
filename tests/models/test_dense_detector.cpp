// The dense (one-stage) meta-architecture alone, with a stand-in network whose outputs the test
// sets: anchors in the network's order, the anchor labels of a ground-truth box, the loss wiring,
// and detection (decode, threshold, NMS, mapping back to the original image), worked by hand.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "detseg/losses/detection_loss.h"
#include "detseg/models/meta_archs/dense_detector.h"

namespace {

// P3 and P4 of a 64 x 64 input, one square anchor of 4 strides per cell: 8x8 + 4x4 = 80 anchors.
detseg::DenseDetectorOptions options() {
  detseg::DenseDetectorOptions o;
  o.num_classes = 2;
  o.image_size = 64;
  o.anchors.min_level = 3;
  o.anchors.max_level = 4;
  o.anchors.num_scales = 1;
  o.anchors.aspect_ratios = {{1.0, 1.0}};
  o.anchors.anchor_scale = 4.0;
  return o;
}

constexpr int64_t kAnchors = 80;
constexpr int64_t kTarget = 2 * 8 + 3;  // P3 cell (row 2, column 3): centre (28, 20)

struct StandIn {
  at::Tensor cls_logits = at::full({1, kAnchors, 2}, -10.0);
  at::Tensor box_regression = at::zeros({1, kAnchors, 4});
};

std::shared_ptr<detseg::DenseDetectorImpl> detector(std::shared_ptr<StandIn> outputs) {
  return std::make_shared<detseg::DenseDetectorImpl>(options(), std::make_shared<torch::nn::Module>(),
                                                     [outputs](const at::Tensor& images) {
                                                       detseg::DenseOutputs out;
                                                       out.cls_logits = outputs->cls_logits.expand({images.size(0), -1, -1});
                                                       out.box_regression = outputs->box_regression.expand({images.size(0), -1, -1});
                                                       out.level_sizes = {{8, 8}, {4, 4}};
                                                       out.strides = {8, 16};
                                                       return out;
                                                     });
}

// One 128 x 128 image resized by 0.5 to the 64 x 64 input, with one box of class 1 exactly on
// anchor kTarget: [12, 4, 44, 36] in input pixels.
detseg::Batch batch() {
  detseg::Batch b;
  b.images = at::zeros({1, 3, 64, 64});
  b.image_sizes = at::tensor({64, 64}, at::kLong).view({1, 2});
  b.original_sizes = at::tensor({128, 128}, at::kLong).view({1, 2});
  b.scales = at::full({1}, 0.5);
  detseg::ImageGeometry g;
  g.scale_x = g.scale_y = 0.5;
  b.geometries = {g};
  b.boxes = at::tensor({12.0f, 4.0f, 44.0f, 36.0f}).view({1, 1, 4});
  b.classes = at::ones({1, 1}, at::kLong);
  b.iscrowd = at::zeros({1, 1}, at::kBool);
  b.num_boxes = at::ones({1}, at::kLong);
  b.image_ids = {7};
  return b;
}

}  // namespace

TEST(DenseDetector, AnchorsFollowTheNetworksOrderLevelThenRowThenColumn) {
  auto model = detector(std::make_shared<StandIn>());
  const at::Tensor a = model->anchors_for(64, 64, at::kCPU);
  ASSERT_EQ(a.sizes(), (std::vector<int64_t>{kAnchors, 4}));
  // The reference's grid: centres at stride / 2 + k * stride, side anchor_scale * stride.
  auto expect_box = [&](int64_t i, std::vector<float> want) {
    for (int k = 0; k < 4; ++k) EXPECT_FLOAT_EQ(a[i][k].item<float>(), want[static_cast<size_t>(k)]) << "anchor " << i;
  };
  expect_box(0, {-12, -12, 20, 20});          // P3 (0, 0): centre (4, 4), side 32
  expect_box(kTarget, {12, 4, 44, 36});        // P3 (2, 3): centre x 28, y 20
  expect_box(63, {44, 44, 76, 76});            // P3 (7, 7)
  expect_box(64, {-24, -24, 40, 40});          // P4 (0, 0): centre (8, 8), side 64
  expect_box(79, {24, 24, 88, 88});            // P4 (3, 3)
}

TEST(DenseDetector, TargetsLabelTheMatchingAnchorAndTheLossIsDetectionLossOnThem) {
  auto outputs = std::make_shared<StandIn>();
  auto model = detector(outputs);
  const detseg::Batch b = batch();
  auto [cls, box] = model->targets(b);
  ASSERT_EQ(cls.sizes(), (std::vector<int64_t>{1, kAnchors}));
  EXPECT_EQ(cls[0][kTarget].item<int64_t>(), 1);  // the box's class
  EXPECT_LT(box[0][kTarget].abs().max().item<float>(), 1e-6);  // the anchor is the box: zero deltas
  // Its four P3 neighbours, 8 px away, overlap it by IoU 24 * 32 / (2 * 1024 - 768) = 0.6 >= 0.5:
  // positives too, with tx or ty = -/+ 8 / 32. The diagonal ones (576 / 1472 = 0.39) and every
  // P4 anchor (at most 1024 / 4096) are background: no ignore band at 0.5 / 0.5.
  for (int64_t n : {kTarget - 8, kTarget - 1, kTarget + 1, kTarget + 8}) EXPECT_EQ(cls[0][n].item<int64_t>(), 1) << n;
  EXPECT_NEAR(box[0][kTarget + 1][1].item<float>(), -0.25, 1e-6);  // x: (28 - 36) / 32
  EXPECT_EQ((cls >= 0).sum().item<int64_t>(), 5);
  EXPECT_EQ((cls == -1).sum().item<int64_t>(), kAnchors - 5);
  // The model's loss is the detection loss of its outputs on these targets.
  outputs->cls_logits = at::randn({1, kAnchors, 2}, at::Generator(at::detail::createCPUGenerator(3)));
  outputs->box_regression = at::randn({1, kAnchors, 4}, at::Generator(at::detail::createCPUGenerator(4))) * 0.1;
  const detseg::ModelLosses losses = model->losses(b);
  const detseg::DetectionLosses want =
      detseg::detection_loss(outputs->cls_logits, outputs->box_regression, cls, box, options().loss);
  EXPECT_FLOAT_EQ(losses.total.item<float>(), want.total.item<float>());
  ASSERT_GE(losses.parts.size(), 2u);
  EXPECT_EQ(losses.parts[0].first, "cls_loss");
  EXPECT_FLOAT_EQ(losses.parts[0].second.item<float>(), want.cls.item<float>());
  EXPECT_EQ(losses.parts[1].first, "box_loss");
}

TEST(DenseDetector, ModelBoxLossChoiceSeesTheBatchAnchors) {
  // model.box_loss giou decodes with the batch's anchors. Predicted codes 0: each positive predicts
  // its own anchor. The matching anchor is the box (GIoU 1, loss 0); its four neighbours are the box
  // moved 8 px: IoU 768 / 1280 = 0.6, hull = union, loss 0.4 each. Sum 1.6 over 5 positives + 1.
  detseg::DenseDetectorOptions o = options();
  o.loss.box_loss(detseg::giou_box_loss).box_loss_weight(1.0);
  auto outputs = std::make_shared<StandIn>();
  auto model = std::make_shared<detseg::DenseDetectorImpl>(o, std::make_shared<torch::nn::Module>(),
                                                           [outputs](const at::Tensor&) {
                                                             detseg::DenseOutputs out;
                                                             out.cls_logits = outputs->cls_logits;
                                                             out.box_regression = outputs->box_regression;
                                                             return out;
                                                           });
  const detseg::ModelLosses losses = model->losses(batch());
  ASSERT_GE(losses.parts.size(), 2u);
  EXPECT_NEAR(losses.parts[1].second.item<float>(), 1.6 / 6, 1e-6);
  EXPECT_NEAR(losses.total.item<float>(), losses.parts[0].second.item<float>() + 1.6 / 6, 1e-6);
}

TEST(DenseDetector, DetectDecodesThresholdsSuppressesAndMapsBackToTheOriginalImage) {
  auto outputs = std::make_shared<StandIn>();
  // Anchor kTarget says class 1 at 0.99995, with deltas that move it by 1/8 of its side in x
  // (tx = 0.125, no scale factors): centre x 28 + 4 = 32. Its neighbour P3 (2, 4), whose box
  // overlaps the decoded one by IoU 28 * 32 / (2048 - 896) = 0.78, says class 1 less surely
  // (suppressed by NMS at 0.5) and class 0 at 0.73 (kept: NMS is per class). Everything else
  // scores sigmoid(-10), below the 0.05 threshold.
  outputs->cls_logits[0][kTarget][1] = 10.0;
  outputs->box_regression[0][kTarget][1] = 0.125;  // (ty, tx, th, tw)
  outputs->cls_logits[0][kTarget + 1][1] = 2.0;
  outputs->cls_logits[0][kTarget + 1][0] = 1.0;
  auto model = detector(outputs);
  model->eval();
  at::NoGradGuard no_grad;
  const std::vector<detseg::Boxes> found = model->detect(batch());
  ASSERT_EQ(found.size(), 1u);
  const detseg::Boxes& d = found[0];
  ASSERT_EQ(d.size(), 2);
  // Best first; boxes in the original 128 x 128 pixels (input pixels / 0.5).
  EXPECT_EQ(d.classes[0].item<int64_t>(), 1);
  EXPECT_NEAR(d.scores[0].item<double>(), 1 / (1 + std::exp(-10.0)), 1e-6);
  const std::vector<float> want0 = {(12 + 4) * 2, 4 * 2, (44 + 4) * 2, 36 * 2};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(d.boxes[0][k].item<float>(), want0[static_cast<size_t>(k)], 1e-3);
  EXPECT_EQ(d.classes[1].item<int64_t>(), 0);
  EXPECT_NEAR(d.scores[1].item<double>(), 1 / (1 + std::exp(-1.0)), 1e-6);
  const std::vector<float> want1 = {20 * 2, 4 * 2, 52 * 2, 36 * 2};  // P3 (2, 4): centre x 36
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(d.boxes[1][k].item<float>(), want1[static_cast<size_t>(k)], 1e-3);
}

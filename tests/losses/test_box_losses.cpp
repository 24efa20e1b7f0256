// Tests: Huber / smooth L1 box losses, model.box_loss's table (vs torchvision's RetinaNet losses)
// and the combined detection loss, by hand and vs torch.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "detseg/config/registry.h"
#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/losses/box_losses.h"
#include "detseg/losses/detection_loss.h"
#include "detseg/losses/huber_loss.h"
#include "detseg/ops/box_coder.h"
#include "test_paths.h"

namespace {

TEST(HuberLoss, HandWorkedMaskedAndNormalised) {
  at::Tensor targets = at::tensor({0.1f, 0.4f, 0.0f, 0.2f}).view({1, 4});
  at::Tensor outputs = at::tensor({0.05f, 0.1f, 5.0f, 0.2f}).view({1, 4});
  // |d| = 0.05 <= delta: 0.5 * 0.05^2 = 0.00125; |d| = 0.3: 0.1 * (0.3 - 0.05) = 0.025;
  // target 0: masked out although the output is 5; d = 0: 0.  Sum / (1 * 4).
  at::Tensor loss = detseg::huber_box_loss(outputs, targets, at::scalar_tensor(1.0));
  EXPECT_NEAR(loss.item<float>(), (0.00125 + 0.025) / 4.0, 1e-7);
}

TEST(HuberLoss, MatchesTorchFixture) {
  const std::string bytes = detseg::read_file(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/losses.pt");
  auto d = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
  at::Tensor out = d.at("box_outputs").toTensor(), tgt = d.at("box_targets").toTensor();
  EXPECT_TRUE(at::allclose(detseg::huber_loss_elementwise(out, tgt, 0.1), d.at("huber_d01").toTensor(),
                           1e-5, 1e-8));
  EXPECT_NEAR(detseg::smooth_l1_loss_sum(out, tgt, 1.0 / 9).item<float>(),
              d.at("smooth_l1_b011").toTensor().item<float>(), 1e-6);
  // Row 1 has zero targets: the masked box loss leaves it out.
  at::Tensor masked = detseg::huber_box_loss(out, tgt, at::scalar_tensor(2.0));
  at::Tensor expected = d.at("huber_d01").toTensor().index({at::tensor({0, 2}, at::kLong)}).sum() / 8.0;
  EXPECT_NEAR(masked.item<float>(), expected.item<float>(), 1e-7);
}

TEST(SmoothL1, HandWorked) {
  at::Tensor out = at::tensor({0.0f, 0.0f});
  at::Tensor tgt = at::tensor({0.5f, 2.0f});
  // beta 1: 0.5 * 0.25 / 1 = 0.125; 2 - 0.5 = 1.5.  beta 0: L1 = 2.5.
  EXPECT_NEAR(detseg::smooth_l1_loss_sum(out, tgt, 1.0).item<float>(), 1.625, 1e-7);
  EXPECT_NEAR(detseg::smooth_l1_loss_sum(out, tgt, 0.0).item<float>(), 2.5, 1e-7);
}

TEST(DetectionLoss, HandWorkedParts) {
  // N = 1, A = 3, K = 2; anchor 0 positive class 0, anchor 1 background, anchor 2 ignored.
  at::Tensor cls_logits = at::zeros({1, 3, 2});
  at::Tensor cls_targets = at::tensor({0, -1, -2}, at::kLong).view({1, 3});
  at::Tensor box_outputs = at::zeros({1, 3, 4});
  box_outputs[0][0] = at::tensor({0.05f, 0.1f, 5.0f, 0.2f});
  box_outputs[0][1] = at::tensor({1.0f, 1.0f, 1.0f, 1.0f});  // zero targets: no box loss
  at::Tensor box_targets = at::zeros({1, 3, 4});
  box_targets[0][0] = at::tensor({0.1f, 0.4f, 0.0f, 0.2f});
  auto losses = detseg::detection_loss(cls_logits, box_outputs, cls_targets, box_targets);
  const double pos = 0.25 * 0.25 * std::log(2.0), neg = 0.75 * 0.25 * std::log(2.0);
  EXPECT_NEAR(losses.num_positives.item<float>(), 2.0, 0);  // 1 positive + 1
  EXPECT_NEAR(losses.cls.item<float>(), (pos + 3 * neg) / 2.0, 1e-6);
  EXPECT_NEAR(losses.box.item<float>(), 0.02625 / 8.0, 1e-7);
  EXPECT_NEAR(losses.total.item<float>(), (pos + 3 * neg) / 2.0 + 50.0 * 0.02625 / 8.0, 1e-6);

  // The per-level form on a split gives the same parts.
  auto per_level = detseg::detection_loss(
      std::vector<at::Tensor>{cls_logits.slice(1, 0, 1), cls_logits.slice(1, 1)},
      std::vector<at::Tensor>{box_outputs.slice(1, 0, 1), box_outputs.slice(1, 1)},
      std::vector<at::Tensor>{cls_targets.slice(1, 0, 1), cls_targets.slice(1, 1)},
      std::vector<at::Tensor>{box_targets.slice(1, 0, 1), box_targets.slice(1, 1)});
  EXPECT_NEAR(per_level.total.item<float>(), losses.total.item<float>(), 1e-7);
}

TEST(DetectionLoss, BackwardAndShapeChecks) {
  at::Tensor cls_logits = at::randn({2, 5, 3}).set_requires_grad(true);
  at::Tensor box = at::randn({2, 5, 4}).set_requires_grad(true);
  at::Tensor labels = at::tensor({0, 1, -1, -2, 2, -1, -1, -1, -1, -1}, at::kLong).view({2, 5});
  at::Tensor box_targets = at::zeros({2, 5, 4});
  box_targets.index_put_({0, 0}, at::full({4}, 0.1));
  auto losses = detseg::detection_loss(cls_logits, box, labels, box_targets,
                                       detseg::DetectionLossOptions().box_loss_weight(10));
  losses.total.backward();
  // The ignored anchor (0, 3) gets no class gradient; only anchor (0, 0) gets a box gradient.
  EXPECT_EQ(cls_logits.grad()[0][3].abs().sum().item<float>(), 0.0f);
  EXPECT_GT(cls_logits.grad()[1][0].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(box.grad().abs().sum().item<float>(), box.grad()[0][0].abs().sum().item<float>());
  EXPECT_THROW(detseg::detection_loss(cls_logits, box, labels.view({10}), box_targets), c10::Error);
}

// One image, two anchors: anchor 0 matched (predicted codes 0, target codes (0.1, -0.2, 0.3, 0)),
// anchor 1 background with large predicted codes that no loss may see. Normaliser 2 (1 + 1).
detseg::BoxLossInputs two_anchor_inputs() {
  detseg::BoxLossInputs in;
  in.predicted = at::zeros({1, 2, 4});
  in.predicted[0][1] = at::tensor({3.0f, -3.0f, 2.0f, 1.0f});
  in.targets = at::zeros({1, 2, 4});
  in.targets[0][0] = at::tensor({0.1f, -0.2f, 0.3f, 0.0f});
  in.positive = at::tensor({1, 0}, at::kInt).to(at::kBool).view({1, 2});
  in.anchors = at::tensor({0.0f, 0.0f, 10.0f, 10.0f, 20.0f, 20.0f, 40.0f, 40.0f}).view({2, 4});
  in.normalizer = at::scalar_tensor(2.0);
  return in;
}

TEST(BoxLossTable, HandWorked) {
  const detseg::BoxLossInputs in = two_anchor_inputs();
  // huber (delta 0.1): 0.5 * 0.1^2 + 0.1 * (0.2 - 0.05) + 0.1 * (0.3 - 0.05) = 0.045, / (4 * 2).
  EXPECT_NEAR(detseg::box_loss_function("huber")(in).item<float>(), 0.045 / 8, 1e-7);
  // l1: (0.1 + 0.2 + 0.3) / 2.
  EXPECT_NEAR(detseg::box_loss_function("l1")(in).item<float>(), 0.3, 1e-7);
  // smooth_l1, beta 1: 0.5 * (0.01 + 0.04 + 0.09) / 2.
  EXPECT_NEAR(detseg::box_loss_function("smooth_l1")(in).item<float>(), 0.035, 1e-7);
  // giou: the prediction (codes 0) is the anchor [0, 0, 10, 10]; the target [5, 0, 15, 10]:
  // IoU 50 / 150, the hull is the union, GIoU 1/3, loss 2/3, / 2.
  detseg::BoxLossInputs shifted = in;
  shifted.targets = at::zeros({1, 2, 4});
  shifted.targets[0][0] = detseg::encode_boxes(at::tensor({5.0f, 0.0f, 15.0f, 10.0f}).view({1, 4}),
                                               in.anchors.slice(0, 0, 1))[0];
  EXPECT_NEAR(detseg::box_loss_function("giou")(shifted).item<float>(), 1.0 / 3, 1e-6);
  // Disjoint boxes: [0, 0, 10, 10] and [20, 0, 30, 10]: IoU 0, hull 300, union 200: GIoU -1/3.
  shifted.targets[0][0] = detseg::encode_boxes(at::tensor({20.0f, 0.0f, 30.0f, 10.0f}).view({1, 4}),
                                               in.anchors.slice(0, 0, 1))[0];
  EXPECT_NEAR(detseg::box_loss_function("giou")(shifted).item<float>(), (4.0 / 3) / 2, 1e-6);
  // A loss on decoded boxes without anchors says so; an unknown name is a config error.
  detseg::BoxLossInputs no_anchors = in;
  no_anchors.anchors = at::Tensor();
  EXPECT_THROW(detseg::giou_box_loss(no_anchors), c10::Error);
  EXPECT_THROW(detseg::box_loss_function("iou"), detseg::ConfigError);
}

TEST(BoxLossTable, MatchesTorchvisionRetinaNetLosses) {
  // tests/fixtures/make_box_loss_fixtures.py: torchvision 0.26's _box_loss on 7 matched anchors.
  const std::string bytes = detseg::read_file(std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/box_losses.pt");
  auto d = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
  detseg::BoxLossInputs in;
  in.anchors = d.at("anchors").toTensor();
  in.predicted = d.at("codes").toTensor().unsqueeze(0);
  in.targets = detseg::encode_boxes(d.at("boxes").toTensor(), in.anchors).unsqueeze(0);
  in.positive = at::ones({1, in.anchors.size(0)}, at::kBool);
  in.normalizer = at::scalar_tensor(1.0);
  for (const char* name : {"l1", "smooth_l1", "giou"})
    EXPECT_NEAR(detseg::box_loss_function(name)(in).item<float>(), d.at(name).toTensor().item<float>(), 2e-5) << name;
}

TEST(BoxLossTable, EveryConfigNameHasAFunctionAndDefaultWeight) {
  ASSERT_GE(detseg::box_losses().size(), 4u);
  const detseg::BoxLossInputs in = two_anchor_inputs();
  for (const detseg::BoxLossInfo& b : detseg::box_losses()) {
    EXPECT_GT(detseg::box_loss_function(b.name)(in).item<float>(), 0.0f) << b.name;
    EXPECT_EQ(detseg::box_loss_weight_of(b.name, -1), b.default_weight) << b.name;
    EXPECT_EQ(detseg::box_loss_weight_of(b.name, 3.5), 3.5) << b.name;
  }
  EXPECT_EQ(detseg::box_loss_weight_of("huber", -1), 50.0);  // the reference's box_loss_weight
  EXPECT_EQ(detseg::box_loss_weight_of("l1", -1), 1.0);      // torchvision adds its box loss unweighted
}

TEST(DetectionLoss, ChosenBoxLossAndWeight) {
  const detseg::BoxLossInputs in = two_anchor_inputs();
  const at::Tensor cls_logits = at::zeros({1, 2, 3});
  const at::Tensor cls_targets = at::tensor({1, -1}, at::kLong).view({1, 2});
  auto huber = detseg::detection_loss(cls_logits, in.predicted, cls_targets, in.targets);
  auto l1 = detseg::detection_loss(cls_logits, in.predicted, cls_targets, in.targets,
                                   detseg::DetectionLossOptions().box_loss(detseg::l1_box_loss).box_loss_weight(2.0),
                                   in.anchors);
  EXPECT_NEAR(l1.box.item<float>(), 0.3, 1e-7);
  EXPECT_NEAR(l1.cls.item<float>(), huber.cls.item<float>(), 1e-7);
  EXPECT_NEAR(l1.total.item<float>(), l1.cls.item<float>() + 2.0 * 0.3, 1e-6);
}

}  // namespace

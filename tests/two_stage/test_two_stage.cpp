// Tests: Faster R-CNN / Mask R-CNN (models/faster_rcnn_network, models/meta_archs/faster_rcnn):
// parity of the networks with torchvision 0.14's maskrcnn_resnet50_fpn (RPN objectness/deltas,
// box-head and mask-head outputs at given boxes, to 1e-4) given its state dict, the RoI level
// mapping, the losses on a hand-worked case, proposal sampling fractions, and the shapes and
// padding of every stage count; the C4 layout against torchvision's resnet50 split, and C4 Mask
// R-CNN's shapes and mask-feature reuse.
#include <gtest/gtest.h>

#include "peer_python.h"
#include <torch/csrc/jit/serialization/pickle.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "detseg/core/files.h"
#include "detseg/io/state_dict.h"
#include "detseg/models/meta_archs/faster_rcnn.h"
#include "detseg/ops/box_ops.h"
#include "detseg/ops/roi_align.h"
#include "detseg/ops/sampler.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using detseg::Batch;
using detseg::FasterRcnnImpl;
using detseg::FasterRcnnNetworkOptions;
using detseg::FasterRcnnOptions;

using detseg::test::torchvision_available;

float max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<float>(); }

TEST(TwoStageParity, MatchesTorchvisionMaskRcnnResNet50Fpn) {
  if (!torchvision_available()) {
    GTEST_SKIP() << DETSEG_PYTHON << " with torchvision not found: Faster/Mask R-CNN parity not checked";
  }
  const detseg::testing::TempDir dir_temp("two_stage_parity");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  const std::string cmd = std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/make_two_stage_parity.py " +
                          dir.string() + " 50 256 320";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  const int64_t num_classes = io.at("num_classes").toTensor().item<int64_t>() - 1;

  detseg::FasterRcnnNetwork net(FasterRcnnNetworkOptions(num_classes).depth(50).masks(true));
  const auto report = detseg::load_state_dict(*net, detseg::read_state_dict((dir / "state_dict.pt").string()));
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_GT(report.loaded.size(), 300u);
  int64_t params = 0;
  for (auto& p : net->parameters()) params += p.numel();
  EXPECT_EQ(params, io.at("num_params").toTensor().item<int64_t>());

  net->eval();
  at::NoGradGuard g;
  auto features = net->features(io.at("input").toTensor());
  ASSERT_EQ(features.size(), 5u);
  EXPECT_EQ(features[4].size(2), 4);  // 256 / 64: the max-pooled P6
  auto [objectness, deltas] = net->rpn_head->forward(features);
  const at::Tensor tv_obj = io.at("objectness").toTensor(), tv_deltas = io.at("rpn_deltas").toTensor();
  ASSERT_EQ(objectness.sizes(), tv_obj.sizes());
  ASSERT_EQ(deltas.sizes(), tv_deltas.sizes());
  EXPECT_LT(max_abs_diff(objectness, tv_obj), 1e-4);
  EXPECT_LT(max_abs_diff(deltas, tv_deltas), 1e-4);

  const at::Tensor boxes = io.at("boxes").toTensor();
  const at::Tensor rois = detseg::boxes_to_rois({boxes});
  // The boxes reach levels 2, 3 and 4.
  const at::Tensor levels = detseg::fpn_roi_levels(boxes, 2, 5);
  EXPECT_EQ(std::get<0>(at::_unique(levels)).numel(), 3);
  auto [cls, box] = net->box_predictions(net->roi_features(features, rois, 7));
  const at::Tensor tv_cls = io.at("class_logits").toTensor(), tv_box = io.at("box_regression").toTensor();
  ASSERT_EQ(cls.sizes(), tv_cls.sizes());
  EXPECT_LT(max_abs_diff(cls, tv_cls), 1e-4);
  EXPECT_LT(max_abs_diff(box.reshape({box.size(0), -1}), tv_box), 1e-4);
  const at::Tensor mask_input = net->roi_features(features, rois, 14);
  const at::Tensor masks = net->mask_logits(mask_input);
  const at::Tensor tv_masks = io.at("mask_logits").toTensor();
  ASSERT_EQ(masks.sizes(), tv_masks.sizes());
  EXPECT_LT(max_abs_diff(masks, tv_masks), 1e-4);
  // One class per RoI (what inference and the mask loss read): torchvision's logits at that class.
  const at::Tensor channels = at::arange(rois.size(0), at::kLong).remainder(tv_masks.size(1));
  const at::Tensor picked = net->class_mask_logits(mask_input, channels);
  const at::Tensor tv_picked = tv_masks.gather(1, channels.view({-1, 1, 1, 1}).expand({-1, 1, 28, 28})).squeeze(1);
  ASSERT_EQ(picked.sizes(), tv_picked.sizes());
  EXPECT_LT(max_abs_diff(picked, tv_picked), 1e-4);
  fs::remove_all(dir);
}

TEST(TwoStageParity, C4MatchesTorchvisionResNet50Split) {
  // torchvision has no C4 detector, but the reference's C4 extractor is its resnet split at layer3:
  // the first stage is conv1..layer3, the second stage layer4 (stride 1) on each region's crop.
  if (!torchvision_available()) {
    GTEST_SKIP() << DETSEG_PYTHON << " with torchvision not found: C4 parity not checked";
  }
  const detseg::testing::TempDir dir_temp("c4_parity");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  const std::string cmd =
      std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/make_c4_parity.py " + dir.string() + " 50 160 224";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();

  // A C4 Mask R-CNN: the classifier's state dict fills backbone.body (both stages) completely.
  detseg::FasterRcnnNetwork net(FasterRcnnNetworkOptions(4).depth(50).c4(true).masks(true));
  detseg::StateDictLoadOptions lo;
  lo.add_prefix = "backbone.body.";
  const detseg::StateDict dict = detseg::read_state_dict((dir / "state_dict.pt").string());
  const auto report = detseg::load_state_dict(*net, dict, lo);
  EXPECT_TRUE(report.shape_mismatch.empty()) << report.summary();
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"backbone.body.fc.bias", "backbone.body.fc.weight"}))
      << report.summary();
  for (const auto& name : report.missing) EXPECT_NE(name.rfind("backbone.body.", 0), 0u) << name;
  // Everything else loads: convs and batch norms (num_batches_tracked is not kept by frozen BN).
  size_t expected = 0;
  for (const auto& [name, value] : dict)
    expected += name.rfind("fc.", 0) != 0 && name.find("num_batches_tracked") == std::string::npos;
  EXPECT_EQ(report.loaded.size(), expected);
  EXPECT_EQ(expected, 53u * 5);  // resnet50: 53 convs, each with its batch norm's 4 tensors

  net->eval();
  at::NoGradGuard g;
  const auto features = net->features(io.at("input").toTensor());
  ASSERT_EQ(features.size(), 1u);
  const at::Tensor tv_layer3 = io.at("layer3").toTensor();
  ASSERT_EQ(features[0].sizes(), tv_layer3.sizes());  // [1, 1024, 10, 14]
  EXPECT_LT(max_abs_diff(features[0], tv_layer3), 1e-4) << "max |layer3| " << tv_layer3.abs().max().item<float>();
  const at::Tensor region = net->box_classifier_features(io.at("crops").toTensor());
  const at::Tensor tv_layer4 = io.at("layer4").toTensor();
  ASSERT_EQ(region.sizes(), tv_layer4.sizes());  // [5, 2048, 7, 7]
  EXPECT_LT(max_abs_diff(region, tv_layer4), 1e-4) << "max |layer4| " << tv_layer4.abs().max().item<float>();
  // The mask head reads those features: 7x7 crops give 14x14 logits for the 4 + 1 classes.
  EXPECT_EQ(net->mask_size(), 14);
  EXPECT_EQ(net->mask_logits(region).sizes(), (std::vector<int64_t>{5, 5, 14, 14}));
  fs::remove_all(dir);
}

TEST(TwoStage, RoiLevelsFollowTorchvisionLevelMapper) {
  // floor(4 + log2(sqrt(area) / 224)), clamped to [2, 5].
  const at::Tensor boxes = at::tensor({0.f, 0.f, 224.f, 224.f,  // 4
                                       0.f, 0.f, 112.f, 112.f,  // 3
                                       0.f, 0.f, 56.f, 56.f,    // 2
                                       0.f, 0.f, 111.f, 111.f,  // 2 (just below 112)
                                       0.f, 0.f, 448.f, 448.f,  // 5
                                       0.f, 0.f, 2000.f, 900.f,  // 6 -> 5
                                       0.f, 0.f, 4.f, 4.f})     // 0 -> 2
                              .view({-1, 4});
  const at::Tensor levels = detseg::fpn_roi_levels(boxes, 2, 5);
  EXPECT_TRUE(at::equal(levels, at::tensor({4, 3, 2, 2, 5, 5, 2}, at::kLong)));
}

// A one-image batch of size x size with the given ground truth (classes 0-based).
Batch make_batch(int64_t size, const at::Tensor& boxes, const at::Tensor& classes, int64_t num_images = 1) {
  Batch b;
  b.images = at::randn({num_images, 3, size, size});
  b.image_sizes = at::full({num_images, 2}, size, at::kLong);
  b.original_sizes = b.image_sizes.clone();
  b.scales = at::ones({num_images});
  b.geometries.resize(static_cast<size_t>(num_images));
  const int64_t m = boxes.size(0);
  b.boxes = boxes.unsqueeze(0).repeat({num_images, 1, 1});
  b.classes = classes.unsqueeze(0).repeat({num_images, 1});
  b.iscrowd = at::zeros({num_images, m}, at::kBool);
  b.num_boxes = at::full({num_images}, m, at::kLong);
  for (int64_t i = 0; i < num_images; ++i) b.image_ids.push_back(i);
  return b;
}

std::shared_ptr<FasterRcnnImpl> small_model(FasterRcnnOptions o, bool masks, int64_t mask_pool = 14) {
  return std::make_shared<FasterRcnnImpl>(
      o, FasterRcnnNetworkOptions(o.num_classes).depth(18).fpn_channels(32).rpn_depth(32).representation_size(64)
             .masks(masks).mask_pool_size(mask_pool).mask_depth(16).frozen_stages(5));
}

// The hand-worked case: one box [0, 0, 32, 32] of class 1 in a 64x64 image.
struct HandCase {
  Batch batch;
  detseg::FasterRcnnPredictions p;
};
HandCase hand_case() {
  HandCase h;
  Batch& batch = h.batch;
  detseg::FasterRcnnPredictions& p = h.p;
  batch = make_batch(64, at::tensor({0.f, 0.f, 32.f, 32.f}).view({1, 4}), at::tensor({1}, at::kLong));
  batch.masks = at::zeros({1, 1, 64, 64}, at::kByte);
  batch.masks[0][0].slice(0, 0, 32).slice(1, 0, 32).fill_(1);

  // RPN: anchor 0 equals the box (positive, target codes 0), anchor 1 is disjoint (negative).
  p.anchors = at::tensor({0.f, 0.f, 32.f, 32.f, 32.f, 32.f, 64.f, 64.f}).view({2, 4});
  p.anchor_indices = at::tensor({0, 1}, at::kLong);
  p.rpn_objectness = at::tensor({0.5f, -1.0f}).view({1, 2});
  p.rpn_box_encodings = at::tensor({0.5f, -0.2f, 2.0f, 0.f, 7.f, 7.f, 7.f, 7.f}).view({1, 2, 4});
  // Second stage: proposal 0 = the box (class 1 -> target 2 with background), proposal 1 IoU 0.25
  // (background), row 2 padding.
  p.proposal_boxes = at::tensor({0.f, 0.f, 32.f, 32.f, 0.f, 0.f, 16.f, 16.f, 0.f, 0.f, 0.f, 0.f}).view({1, 3, 4});
  p.proposal_scores = at::ones({1, 3});
  p.num_proposals = at::tensor({2}, at::kLong);
  p.class_predictions_with_background = at::tensor({0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 5.f, 5.f, 5.f}).view({3, 3});
  p.refined_box_encodings = at::zeros({3, 2, 4});
  p.refined_box_encodings[0][0].fill_(9);  // class 0's encoding: not the target class
  p.refined_box_encodings[0][1].copy_(at::tensor({0.5f, 0.f, 0.f, -3.f}));
  p.refined_box_encodings[1].fill_(9);  // background proposal: no box loss
  p.refined_box_encodings[2].fill_(9);  // padding
  // Masks (2x2): proposal 0's class-2 channel; every other channel must be ignored.
  p.mask_logits = at::full({2, 3, 2, 2}, 7.f);
  p.mask_logits[0][2].copy_(at::tensor({2.f, 0.f, 0.f, -2.f}).view({2, 2}));
  return h;
}

std::map<std::string, double> loss_values(const detseg::ModelLosses& l) {
  std::map<std::string, double> v;
  for (auto& [name, value] : l.parts) v[name] = value.item<double>();
  return v;
}

TEST(TwoStage, LossesMatchHandWorkedValues) {
  FasterRcnnOptions o;
  o.num_classes = 2;
  o.image_size = 64;
  auto model = small_model(o, /*masks=*/true, /*mask_pool=*/1);
  model->train();
  auto [batch, p] = hand_case();
  const detseg::ModelLosses l = model->loss(p, batch);
  std::map<std::string, double> v = loss_values(l);
  // objectness: (log(1 + e^-0.5) + log(1 + e^-1)) / 2 sampled anchors
  EXPECT_NEAR(v["first_stage_objectness_loss"], (std::log1p(std::exp(-0.5)) + std::log1p(std::exp(-1.0))) / 2, 1e-6);
  // localization: weight 2 x huber(0.5) + huber(-0.2) + huber(2) = 0.125 + 0.02 + 1.5, / 2 sampled
  EXPECT_NEAR(v["first_stage_localization_loss"], 2.0 * 1.645 / 2, 1e-5);
  // classification: (CE([0,0,0], 2) + CE([1,0,0], 0)) / 2 proposals
  EXPECT_NEAR(v["second_stage_classification_loss"], (std::log(3.0) + std::log(1 + 2 / std::exp(1.0))) / 2, 1e-6);
  // box: weight 2 x (huber(0.5) + huber(-3) = 0.125 + 2.5) / 2 proposals
  EXPECT_NEAR(v["second_stage_localization_loss"], 2.0 * 2.625 / 2, 1e-5);
  // mask: the 2x2 crop of the box's mask samples rows/columns 0 and 31.5 -> targets 1, .5, .5, .25;
  // sigmoid CE of logits (2, 0, 0, -2) averaged over the 4 pixels of the one positive.
  const double bce = (std::log1p(std::exp(-2.0)) + 2 * std::log(2.0) + (0.5 + std::log1p(std::exp(-2.0)))) / 4;
  EXPECT_NEAR(v["second_stage_mask_loss"], bce, 1e-5);
  double sum = 0;
  for (auto& [name, value] : v) sum += value;
  EXPECT_NEAR(l.total.item<double>(), sum, 1e-5);
}

TEST(TwoStage, HardExampleMinerKeepsTheHardestProposal) {
  // Mining one example per image: proposal 0 ranks first (0.05 * cls + 0.06 * loc), so the
  // second-stage losses are proposal 0's alone, with the same normaliser.
  FasterRcnnOptions o;
  o.num_classes = 2;
  o.image_size = 64;
  o.hard_example_miner_num_examples = 1;
  auto model = small_model(o, /*masks=*/false);
  model->train();
  auto [batch, p] = hand_case();
  std::map<std::string, double> v = loss_values(model->loss(p, batch));
  EXPECT_NEAR(v["second_stage_classification_loss"], std::log(3.0) / 2, 1e-6);
  EXPECT_NEAR(v["second_stage_localization_loss"], 2.0 * 2.625 / 2, 1e-5);
  EXPECT_EQ(v.count("second_stage_mask_loss"), 0u);
  EXPECT_EQ(model->max_num_proposals(), o.first_stage_max_proposals);  // no sampling with the miner
}

TEST(TwoStage, BalancedSamplerFractions) {
  // 1000 candidates, 100 positives: batch 64 at 0.25 takes 16 positives and 48 negatives.
  at::Tensor indicator = at::ones({1000}, at::kBool);
  at::Tensor labels = at::zeros({1000}, at::kBool);
  labels.slice(0, 0, 100).fill_(true);
  detseg::BalancedSamplerOptions so;
  so.batch_size = 64;
  so.positive_fraction = 0.25;
  at::Tensor s = detseg::sample_balanced(indicator, labels, so);
  EXPECT_EQ(s.sum().item<int64_t>(), 64);
  EXPECT_EQ((s & labels).sum().item<int64_t>(), 16);
  // Few positives: all of them, the rest negatives.
  labels.fill_(false);
  labels.slice(0, 0, 5).fill_(true);
  s = detseg::sample_balanced(indicator, labels, so);
  EXPECT_EQ(s.sum().item<int64_t>(), 64);
  EXPECT_EQ((s & labels).sum().item<int64_t>(), 5);
}

TEST(TwoStage, TrainingSamplesProposalsWithThePositiveFraction) {
  FasterRcnnOptions o;
  o.num_classes = 3;
  o.image_size = 128;
  o.second_stage_batch_size = 32;
  o.second_stage_balance_fraction = 0.25;
  o.second_stage_add_groundtruth_proposals = true;
  auto model = small_model(o, false);
  model->train();
  const at::Tensor gt = at::tensor({10.f, 10.f, 60.f, 50.f, 70.f, 60.f, 120.f, 120.f}).view({2, 4});
  Batch batch = make_batch(128, gt, at::tensor({0, 2}, at::kLong), 2);
  detseg::FasterRcnnPredictions p = model->predict(batch);
  EXPECT_EQ(model->max_num_proposals(), 32);
  EXPECT_EQ(p.proposal_boxes.sizes(), (std::vector<int64_t>{2, 32, 4}));
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_EQ(p.num_proposals[b].item<int64_t>(), 32);  // 300 proposals + 2 boxes to choose from
    at::Tensor iou = detseg::box_iou_pairwise(p.proposal_boxes[b], gt);
    const int64_t positives = (std::get<0>(iou.max(1)) >= 0.5).sum().item<int64_t>();
    EXPECT_GE(positives, 2);  // the ground-truth boxes themselves
    EXPECT_LE(positives, 8);  // floor(0.25 * 32)
  }
  EXPECT_EQ(p.class_predictions_with_background.sizes(), (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(p.refined_box_encodings.sizes(), (std::vector<int64_t>{64, 3, 4}));
}

TEST(TwoStage, ShapesAndPaddingForEachStageCount) {
  const at::Tensor gt = at::tensor({10.f, 10.f, 60.f, 50.f}).view({1, 4});
  for (int64_t stages = 1; stages <= 3; ++stages) {
    SCOPED_TRACE("number_of_stages " + std::to_string(stages));
    FasterRcnnOptions o;
    o.num_classes = 3;
    o.image_size = 96;
    o.number_of_stages = stages;
    o.first_stage_max_proposals = 50;
    o.second_stage_batch_size = 16;
    o.postprocess.score_threshold = 0.0;
    auto model = small_model(o, stages >= 2);
    Batch batch = make_batch(96, gt, at::tensor({1}, at::kLong), 2);
    batch.image_sizes[1][0] = 64;  // image 1 is 64 rows high (padded below)
    batch.masks = at::zeros({2, 1, 96, 96}, at::kByte);
    batch.masks.select(1, 0).slice(1, 10, 50).slice(2, 10, 60).fill_(1);

    model->eval();
    at::NoGradGuard no_grad;
    EXPECT_EQ(model->stages(), stages);
    detseg::FasterRcnnPredictions p = model->predict(batch);
    const int64_t anchors = 3 * (24 * 24 + 12 * 12 + 6 * 6 + 3 * 3 + 2 * 2);
    EXPECT_EQ(p.anchors.sizes(), (std::vector<int64_t>{anchors, 4}));
    EXPECT_EQ(p.rpn_objectness.sizes(), (std::vector<int64_t>{2, anchors}));
    EXPECT_EQ(p.rpn_box_encodings.sizes(), (std::vector<int64_t>{2, anchors, 4}));
    EXPECT_EQ(p.raw_proposal_boxes.sizes(), (std::vector<int64_t>{2, anchors, 4}));  // clipped, none pruned
    EXPECT_EQ(p.proposal_boxes.sizes(), (std::vector<int64_t>{2, 50, 4}));
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t n = p.num_proposals[b].item<int64_t>();
      EXPECT_GT(n, 0);
      EXPECT_LE(n, 50);
      EXPECT_EQ(p.proposal_boxes[b].slice(0, n).abs().sum().item<float>(), 0.f);  // padding rows are zero
      // Proposals lie inside each image's own (unpadded) window.
      EXPECT_LE(p.proposal_boxes[b].select(1, 3).max().item<float>(), b == 1 ? 64.f : 96.f);
      if (stages >= 2) {
        EXPECT_EQ(p.class_predictions_with_background.slice(0, b * 50 + n, (b + 1) * 50).abs().sum().item<float>(), 0.f);
      }
    }
    if (stages == 1) {
      EXPECT_FALSE(p.class_predictions_with_background.defined());
    } else {
      EXPECT_EQ(p.class_predictions_with_background.sizes(), (std::vector<int64_t>{100, 4}));
      EXPECT_EQ(p.refined_box_encodings.sizes(), (std::vector<int64_t>{100, 3, 4}));
    }
    auto [losses, dets] = model->losses_and_detect(batch);
    EXPECT_EQ(losses.parts.size(), stages == 1 ? 2u : 5u);
    ASSERT_EQ(dets.size(), 2u);
    for (const auto& d : dets) {
      d.validate();
      if (stages == 1) {
        EXPECT_EQ(d.classes.abs().sum().item<int64_t>(), 0);  // class-agnostic proposals
        EXPECT_FALSE(d.masks.defined());
      } else {
        EXPECT_LE(d.size(), 100);
        EXPECT_TRUE(d.masks.defined());
        EXPECT_EQ(d.masks.sizes(), (std::vector<int64_t>{d.size(), 96, 96}));
      }
      if (d.size() > 1) {
        EXPECT_TRUE(at::all(d.scores.slice(0, 0, -1) >= d.scores.slice(0, 1)).item<bool>());
      }
    }
    // Training runs 3 stages as 2; proposals are then padded to second_stage_batch_size.
    model->train();
    EXPECT_EQ(model->stages(), std::min<int64_t>(stages, 2));
    EXPECT_EQ(model->max_num_proposals(), stages == 1 ? 50 : 16);
  }
}

TEST(TwoStage, EachImageGetsMasksFromItsOwnFeatures) {
  // Image B's detections and masks are the same whether B is first or second in the batch.
  for (int64_t stages = 2; stages <= 3; ++stages) {
    SCOPED_TRACE("number_of_stages " + std::to_string(stages));
    FasterRcnnOptions o;
    o.num_classes = 3;
    o.image_size = 64;
    o.number_of_stages = stages;
    o.first_stage_max_proposals = 30;
    o.postprocess.score_threshold = 0.0;
    o.postprocess.max_detections_per_image = 10;
    auto model = small_model(o, true);
    model->eval();
    at::NoGradGuard no_grad;
    Batch ab = make_batch(64, at::tensor({10.f, 10.f, 40.f, 50.f}).view({1, 4}), at::tensor({1}, at::kLong), 2);
    ab.images[1].mul_(3).add_(1);
    Batch ba = ab;
    ba.images = at::stack({ab.images[1], ab.images[0]});
    const auto d_ab = model->detect(ab), d_ba = model->detect(ba);
    ASSERT_EQ(d_ab[1].size(), d_ba[0].size());
    ASSERT_GT(d_ab[1].size(), 0);
    EXPECT_TRUE(at::allclose(d_ab[1].scores, d_ba[0].scores, 1e-4, 1e-5));
    const double differing = (d_ab[1].masks != d_ba[0].masks).sum().item<double>() / d_ab[1].masks.numel();
    EXPECT_LT(differing, 0.001);
    // ... and differ from image A's.
    EXPECT_FALSE(at::equal(d_ab[0].masks.sum(0), d_ab[1].masks.sum(0)));
  }
}

TEST(TwoStage, C4LayoutShapesAndGradients) {
  // The reference's C4 layout: RPN on layer3 (stride 16) with its grid anchors (4 scales x 3
  // ratios of a 256 base), crops of 14 max-pooled to 7, layer4 at stride 1, mean-pooled.
  FasterRcnnOptions o;
  o.num_classes = 3;
  o.image_size = 96;
  o.feature_extractor = "c4";
  o.first_stage_anchor_sizes = {256};
  o.first_stage_anchor_scales = {0.25, 0.5, 1.0, 2.0};
  o.first_stage_anchor_aspect_ratios = {0.5, 1.0, 2.0};
  o.first_stage_max_proposals = 20;
  o.second_stage_batch_size = 8;
  o.second_stage_add_groundtruth_proposals = true;
  auto model = std::make_shared<FasterRcnnImpl>(
      o, FasterRcnnNetworkOptions(3).depth(18).c4(true).rpn_depth(32).frozen_stages(0).frozen_bn(false));
  EXPECT_EQ(model->network->strides(), (std::vector<int64_t>{16}));
  Batch batch = make_batch(96, at::tensor({10.f, 10.f, 60.f, 50.f}).view({1, 4}), at::tensor({1}, at::kLong), 2);
  {
    model->eval();
    at::NoGradGuard no_grad;
    detseg::FasterRcnnPredictions p = model->predict(batch);
    EXPECT_EQ(p.features.size(), 1u);
    EXPECT_EQ(p.features[0].sizes(), (std::vector<int64_t>{2, 256, 6, 6}));  // ResNet-18 layer3
    EXPECT_EQ(p.anchors.size(0), 6 * 6 * 12);
    EXPECT_EQ(p.class_predictions_with_background.sizes(), (std::vector<int64_t>{40, 4}));
    const at::Tensor crops = model->network->roi_features(p.features, detseg::boxes_to_rois({p.proposal_boxes[0]}), 7);
    EXPECT_EQ(crops.sizes(), (std::vector<int64_t>{20, 256, 7, 7}));
    const at::Tensor region = model->network->box_classifier_features(crops);
    EXPECT_EQ(region.sizes(), (std::vector<int64_t>{20, 512, 7, 7}));  // layer4 at stride 1
    EXPECT_EQ(model->network->box_representation(region).sizes(), (std::vector<int64_t>{20, 512}));
  }
  model->train();
  detseg::ModelLosses l = model->losses(batch);
  ASSERT_EQ(l.parts.size(), 4u);
  EXPECT_TRUE(std::isfinite(l.total.item<double>()));
  l.total.backward();
  // layer4 is the box classifier: it gets gradients; the predictor reads its 512 channels.
  const auto params = model->named_parameters();
  EXPECT_GT(params["backbone.body.layer4.0.conv1.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_GT(params["backbone.body.layer3.0.conv1.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_EQ(params["roi_heads.box_predictor.cls_score.weight"].size(1), 512);
  EXPECT_FALSE(params.contains("roi_heads.box_head.fc6.weight"));
}

std::shared_ptr<FasterRcnnImpl> small_c4_model(FasterRcnnOptions o, bool masks) {
  o.feature_extractor = "c4";
  o.first_stage_anchor_sizes = {256};
  o.first_stage_anchor_scales = {0.25, 0.5, 1.0, 2.0};
  o.first_stage_anchor_aspect_ratios = {0.5, 1.0, 2.0};
  return std::make_shared<FasterRcnnImpl>(o, FasterRcnnNetworkOptions(o.num_classes).depth(18).c4(true).rpn_depth(32)
                                                 .masks(masks).mask_depth(16).frozen_stages(0));
}

TEST(TwoStage, C4MaskRcnnShapesForTwoAndThreeStages) {
  // C4 masks: 14 crops max-pooled to 7, layer4 (512 channels for ResNet-18), deconv to 14x14.
  const at::Tensor gt = at::tensor({10.f, 10.f, 60.f, 50.f}).view({1, 4});
  for (int64_t stages = 2; stages <= 3; ++stages) {
    SCOPED_TRACE("number_of_stages " + std::to_string(stages));
    FasterRcnnOptions o;
    o.num_classes = 3;
    o.image_size = 96;
    o.number_of_stages = stages;
    o.first_stage_max_proposals = 20;
    o.second_stage_batch_size = 8;
    o.second_stage_add_groundtruth_proposals = true;
    o.postprocess.score_threshold = 0.0;
    o.postprocess.max_detections_per_image = 10;
    auto model = small_c4_model(o, true);
    EXPECT_EQ(model->network->mask_size(), 14);
    const auto params = model->named_parameters();
    EXPECT_EQ(params["roi_heads.mask_predictor.conv5_mask.weight"].sizes(), (std::vector<int64_t>{512, 16, 2, 2}));
    EXPECT_EQ(params["roi_heads.mask_predictor.mask_fcn_logits.weight"].sizes(), (std::vector<int64_t>{4, 16, 1, 1}));
    EXPECT_FALSE(params.contains("roi_heads.mask_head.0.0.weight"));
    Batch batch = make_batch(96, gt, at::tensor({1}, at::kLong), 2);
    batch.image_sizes[1][0] = 64;
    batch.masks = at::zeros({2, 1, 96, 96}, at::kByte);
    batch.masks.select(1, 0).slice(1, 10, 50).slice(2, 10, 60).fill_(1);
    {
      model->eval();
      at::NoGradGuard no_grad;
      detseg::FasterRcnnPredictions p = model->predict(batch);
      const int64_t valid = p.num_proposals.sum().item<int64_t>();
      EXPECT_GT(valid, 0);
      // Two stages: the mask head reads the box classifier's layer4 features of the proposals.
      // Three: it re-crops at the final boxes, so predict() keeps none.
      if (stages == 2) {
        EXPECT_EQ(p.box_classifier_features.sizes(), (std::vector<int64_t>{valid, 512, 7, 7}));
      } else {
        EXPECT_FALSE(p.box_classifier_features.defined());
      }
      const at::Tensor logits = model->network->mask_logits(
          model->network->mask_features(p.features, detseg::boxes_to_rois({p.proposal_boxes[0].slice(0, 0, 3)})));
      EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 4, 14, 14}));
      auto [losses, dets] = model->losses_and_detect(batch);
      ASSERT_EQ(losses.parts.size(), 5u);
      EXPECT_EQ(losses.parts[4].first, "second_stage_mask_loss");
      EXPECT_TRUE(std::isfinite(losses.parts[4].second.item<double>()));
      ASSERT_EQ(dets.size(), 2u);
      for (const auto& d : dets) {
        d.validate();
        EXPECT_GT(d.size(), 0);
        EXPECT_LE(d.size(), 10);
        ASSERT_TRUE(d.masks.defined());
        EXPECT_EQ(d.masks.sizes(), (std::vector<int64_t>{d.size(), 96, 96}));
      }
      if (stages == 2) {
        // The stored features give the masks that cropping again gives.
        detseg::FasterRcnnPredictions again = p;
        again.box_classifier_features = at::Tensor();
        const auto stored = model->postprocess(p, batch), cropped = model->postprocess(again, batch);
        for (size_t b = 0; b < 2; ++b) EXPECT_TRUE(at::allclose(stored[b].masks, cropped[b].masks, 1e-4, 1e-5));
      }
    }
    // Training (3 runs as 2): the mask head reads the sampled proposals' layer4 features.
    model->train();
    detseg::FasterRcnnPredictions p = model->predict(batch);
    EXPECT_EQ(p.box_classifier_features.size(0), p.num_proposals.sum().item<int64_t>());
    detseg::ModelLosses l = model->loss(p, batch);
    ASSERT_EQ(l.parts.size(), 5u);
    const at::Tensor mask_loss = l.parts[4].second;
    EXPECT_GT(mask_loss.item<double>(), 0);
    // Its gradient reaches the deconv and layer4 (the second stage) through the stored features.
    mask_loss.backward();
    EXPECT_GT(params["roi_heads.mask_predictor.conv5_mask.weight"].grad().abs().sum().item<double>(), 0);
    EXPECT_GT(params["backbone.body.layer4.1.conv2.weight"].grad().abs().sum().item<double>(), 0);
  }
}

TEST(TwoStage, C4MaskLossFromStoredFeaturesEqualsCroppingAgain) {
  // Frozen batch norm, so layer4's output for a region does not depend on the other regions.
  FasterRcnnOptions o;
  o.num_classes = 3;
  o.image_size = 96;
  o.first_stage_max_proposals = 20;
  o.second_stage_batch_size = 8;
  o.second_stage_add_groundtruth_proposals = true;
  o.feature_extractor = "c4";
  o.first_stage_anchor_sizes = {256};
  o.first_stage_anchor_scales = {0.25, 0.5, 1.0, 2.0};
  o.first_stage_anchor_aspect_ratios = {0.5, 1.0, 2.0};
  auto model = std::make_shared<FasterRcnnImpl>(
      o, FasterRcnnNetworkOptions(3).depth(18).c4(true).rpn_depth(32).masks(true).mask_depth(16));
  Batch batch = make_batch(96, at::tensor({10.f, 10.f, 60.f, 50.f, 50.f, 40.f, 90.f, 90.f}).view({2, 4}),
                           at::tensor({1, 2}, at::kLong), 2);
  batch.masks = at::zeros({2, 2, 96, 96}, at::kByte);
  batch.masks.select(1, 0).slice(1, 10, 50).slice(2, 10, 60).fill_(1);
  batch.masks.select(1, 1).slice(1, 40, 90).slice(2, 50, 90).fill_(1);
  model->train();
  at::NoGradGuard no_grad;
  detseg::FasterRcnnPredictions p = model->predict(batch);
  ASSERT_TRUE(p.box_classifier_features.defined());
  const double stored = model->loss(p, batch).parts.back().second.item<double>();
  p.box_classifier_features = at::Tensor();
  const double cropped = model->loss(p, batch).parts.back().second.item<double>();
  EXPECT_GT(stored, 0);
  EXPECT_NEAR(stored, cropped, 1e-5 * stored);
}

TEST(TwoStage, PasteMasksFillsTheBox) {
  // A mask of ones over box [10, 20) x [5, 25) fills (about) that box only.
  at::Tensor masks = at::ones({1, 28, 28});
  at::Tensor pasted = detseg::paste_masks(masks, at::tensor({10.f, 5.f, 20.f, 25.f}).view({1, 4}), 40, 30);
  EXPECT_EQ(pasted.sizes(), (std::vector<int64_t>{1, 40, 30}));
  EXPECT_EQ(pasted[0][15][15].item<uint8_t>(), 1);
  EXPECT_EQ(pasted[0][2][2].item<uint8_t>(), 0);
  EXPECT_EQ(pasted[0][35][25].item<uint8_t>(), 0);
  const int64_t area = pasted.sum().item<int64_t>();
  EXPECT_GE(area, 10 * 20);
  EXPECT_LE(area, 12 * 22);
}

// Under autocast the heads' outputs are bf16: the losses must still be computed (and returned) in
// fp32, with the values of the fp32 computation on the same (bf16-rounded) predictions.
TEST(TwoStage, LossesOfBf16PredictionsAreFp32) {
  FasterRcnnOptions o;
  o.num_classes = 2;
  o.image_size = 64;
  auto model = small_model(o, /*masks=*/true, /*mask_pool=*/1);
  model->train();
  auto [batch, p] = hand_case();
  for (at::Tensor* t : {&p.rpn_objectness, &p.rpn_box_encodings, &p.class_predictions_with_background,
                        &p.refined_box_encodings, &p.mask_logits})
    *t = t->to(at::kBFloat16);
  detseg::FasterRcnnPredictions rounded = p;
  for (at::Tensor* t : {&rounded.rpn_objectness, &rounded.rpn_box_encodings,
                        &rounded.class_predictions_with_background, &rounded.refined_box_encodings,
                        &rounded.mask_logits})
    *t = t->to(at::kFloat);
  const detseg::ModelLosses low = model->loss(p, batch);
  const detseg::ModelLosses ref = model->loss(rounded, batch);
  ASSERT_EQ(low.parts.size(), ref.parts.size());
  for (size_t i = 0; i < low.parts.size(); ++i) {
    EXPECT_EQ(low.parts[i].second.scalar_type(), at::kFloat) << low.parts[i].first;
    EXPECT_NEAR(low.parts[i].second.item<double>(), ref.parts[i].second.item<double>(),
                1e-2 * std::abs(ref.parts[i].second.item<double>()) + 1e-6)
        << low.parts[i].first;
  }
  EXPECT_EQ(low.total.scalar_type(), at::kFloat);
}

// Sets CPU autocast to bf16 for its lifetime (what a CUDA run does with the CUDA autocast).
struct CpuAutocastBf16 {
  CpuAutocastBf16() {
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  }
  ~CpuAutocastBf16() {
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
  }
};

TEST(TwoStage, TrainStepAndDetectUnderBf16Autocast) {
  FasterRcnnOptions o;
  o.num_classes = 3;
  o.image_size = 64;
  o.second_stage_batch_size = 16;
  auto model = small_model(o, /*masks=*/true);
  const at::Tensor gt = at::tensor({4.f, 6.f, 40.f, 30.f, 30.f, 20.f, 62.f, 60.f}).view({2, 4});
  Batch batch = make_batch(64, gt, at::tensor({0, 2}, at::kLong), 2);
  batch.masks = at::zeros({2, 2, 64, 64}, at::kByte);
  batch.masks.select(1, 0).slice(1, 6, 30).slice(2, 4, 40).fill_(1);
  batch.masks.select(1, 1).slice(1, 20, 60).slice(2, 30, 62).fill_(1);
  model->train();
  {
    CpuAutocastBf16 autocast;
    const detseg::ModelLosses l = model->losses(batch);
    for (const auto& [name, value] : l.parts) {
      EXPECT_EQ(value.scalar_type(), at::kFloat) << name;
      EXPECT_TRUE(std::isfinite(value.item<double>())) << name;
    }
    ASSERT_EQ(l.total.scalar_type(), at::kFloat);
    l.total.backward();
  }
  int64_t with_grad = 0;
  for (const auto& param : model->parameters())
    if (param.grad().defined()) {
      ++with_grad;
      EXPECT_EQ(param.grad().scalar_type(), param.scalar_type());
      EXPECT_TRUE(at::isfinite(param.grad()).all().item<bool>());
    }
  EXPECT_GT(with_grad, 0);
  model->eval();
  at::NoGradGuard no_grad;
  CpuAutocastBf16 autocast;
  for (const detseg::Boxes& d : model->detect(batch)) {
    EXPECT_EQ(d.boxes.scalar_type(), at::kFloat);
    EXPECT_EQ(d.scores.scalar_type(), at::kFloat);
  }
}

}  // namespace

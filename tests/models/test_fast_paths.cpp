// ops/fast_paths.h: one switch set for the CPU fast paths (oneDNN blocked inference, channels-last
// conv weights), read from
// the environment once and settable in-process; the fast path computes what plain ATen does (a
// whole RetinaNet at inference, to float rounding).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "detseg/config/config.h"
#include "detseg/data/example.h"
#include "detseg/models/build.h"
#include "detseg/models/retinanet_network.h"
#include "detseg/ops/fast_paths.h"
#include "detseg/ops/packed_conv.h"

namespace {

// Restores the process's switches when a test ends.
struct KeepFastPaths {
  detseg::FastPathOptions saved = detseg::fast_paths();
  ~KeepFastPaths() { detseg::set_fast_paths(saved); }
};

float relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1.0)).item<float>();
}

}  // namespace

TEST(FastPaths, TheSwitchTurnsThePathOffAndOnAgain) {
  KeepFastPaths keep;
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({1, 256, 32, 32});
  detseg::set_fast_paths({/*mkldnn_inference=*/true});
  EXPECT_EQ(detseg::mkldnn_inference_enabled(x, /*training=*/false), at::hasMKLDNN());
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, /*training=*/true));
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x.to(at::kDouble), false));
  detseg::set_fast_paths({false});
  EXPECT_FALSE(detseg::mkldnn_inference_enabled(x, false));
}

TEST(FastPaths, LayoutMarksReorderOnlyWhereThePathRuns) {
  KeepFastPaths keep;
  at::NoGradGuard no_grad;
  const at::Tensor x = at::randn({2, 8, 5, 7});
  detseg::set_fast_paths({true});
  if (!at::hasMKLDNN()) GTEST_SKIP() << "LibTorch built without oneDNN";
  const at::Tensor fast = detseg::to_fast_layout(x, /*training=*/false);
  EXPECT_TRUE(detseg::in_fast_layout(fast));
  EXPECT_TRUE(detseg::to_fast_layout(fast, false).is_same(fast));  // already there: untouched
  EXPECT_TRUE(at::equal(detseg::to_plain_layout(fast), x));         // a reorder, not arithmetic
  EXPECT_TRUE(detseg::to_plain_layout(x).is_same(x));
  EXPECT_TRUE(detseg::to_fast_layout(x, /*training=*/true).is_same(x));
  // The mean over H and W, from either layout, as a plain [N, C, 1, 1].
  const at::Tensor pooled = detseg::global_average_pool(fast);
  EXPECT_FALSE(detseg::in_fast_layout(pooled));
  EXPECT_EQ(pooled.sizes(), (std::vector<int64_t>{2, 8, 1, 1}));
  EXPECT_LT((pooled - x.mean({2, 3}, true)).abs().max().item<float>(), 1e-6);
  EXPECT_TRUE(at::equal(detseg::global_average_pool(x), x.mean({2, 3}, true)));
  detseg::set_fast_paths({false});
  EXPECT_TRUE(detseg::to_fast_layout(x, false).is_same(x));
}

TEST(FastPaths, PackedConvMatchesAtenRepacksOnChangeAndTakesTheCentreTap) {
  KeepFastPaths keep;
  at::NoGradGuard no_grad;
  detseg::set_fast_paths({true});
  if (!at::hasMKLDNN()) GTEST_SKIP() << "LibTorch built without oneDNN";
  const at::Tensor x = at::randn({1, 6, 9, 11});
  const at::Tensor fast = detseg::to_fast_layout(x, false);
  at::Tensor weight = at::randn({4, 6, 3, 3});
  at::Tensor bias = at::randn({4});
  int made = 0;
  detseg::PackedConvWeights packed;
  auto run = [&](int64_t dilation) {
    return detseg::to_plain_layout(detseg::conv2d_packed(
        fast, weight, {1, 1}, {dilation, dilation}, {dilation, dilation}, 1, {&weight, &bias},
        [&] { ++made; return std::pair<at::Tensor, at::Tensor>{weight, bias}; }, packed));
  };
  auto aten = [&](int64_t dilation) {
    return at::conv2d(x, weight, bias, 1, {dilation, dilation}, {dilation, dilation});
  };
  EXPECT_LT((run(1) - aten(1)).abs().max().item<float>(), 1e-4);
  EXPECT_LT((run(1) - aten(1)).abs().max().item<float>(), 1e-4);
  EXPECT_EQ(made, 1);  // packed once, reused
  weight.mul_(-2.0);   // a change in place bumps the version: repacked
  EXPECT_LT((run(1) - aten(1)).abs().max().item<float>(), 1e-4);
  EXPECT_EQ(made, 2);
  // Dilation 11 reaches past the 9x11 map: every off-centre tap reads padding, so the centre tap
  // alone (a 1x1 conv, packed separately) gives the same values.
  EXPECT_LT((run(11) - aten(11)).abs().max().item<float>(), 1e-4);
  EXPECT_EQ(made, 3);
  EXPECT_EQ(packed.weight.size(2), 1);
}

TEST(FastPaths, RetinaNetComputesTheSameWithAndWithoutThem) {
  KeepFastPaths keep;
  // Frozen batch norm: the backbone folds it into oneDNN's packed weights at inference.
  detseg::RetinaNetNetwork net(detseg::RetinaNetNetworkOptions(3).depth(18).fpn_channels(128));
  net->eval();
  at::NoGradGuard no_grad;
  const at::Tensor images = at::randn({1, 3, 256, 320}, at::Generator(at::detail::createCPUGenerator(5)));
  detseg::set_fast_paths({true});
  const detseg::DenseOutputs fast = net->forward(images);
  detseg::set_fast_paths({false});
  const detseg::DenseOutputs plain = net->forward(images);
  EXPECT_LT(relative_difference(fast.cls_logits, plain.cls_logits), 1e-4);
  EXPECT_LT(relative_difference(fast.box_regression, plain.box_regression), 1e-4);
}

TEST(FastPaths, ChannelsLastWeightsTrainAndInferAsPlainOnes) {
  KeepFastPaths keep;
  // Trainable batch norm: the training forward and backward run on NHWC activations end to end.
  auto make = [] {
    at::manual_seed(3);
    return detseg::RetinaNetNetwork(detseg::RetinaNetNetworkOptions(3).depth(18).fpn_channels(64).frozen_bn(false));
  };
  detseg::RetinaNetNetwork plain = make(), fast = make();
  detseg::FastPathOptions off = detseg::fast_paths();
  off.channels_last_weights = false;
  detseg::set_fast_paths(off);
  EXPECT_EQ(detseg::to_fast_weight_layout(plain->parameters()), 0);
  detseg::FastPathOptions on = off;
  on.channels_last_weights = true;
  detseg::set_fast_paths(on);
  const int64_t changed = detseg::to_fast_weight_layout(fast->parameters());
  EXPECT_GT(changed, 20);  // every 3x3 / 7x7 conv of ResNet-18, the FPN and the head
  EXPECT_EQ(detseg::to_fast_weight_layout(fast->parameters()), 0);  // already there
  const at::Tensor stem = fast->backbone->body->named_parameters()["conv1.weight"];
  EXPECT_TRUE(stem.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(stem.is_contiguous());
  const at::Tensor images = at::randn({2, 3, 128, 160}, at::Generator(at::detail::createCPUGenerator(5)));
  auto loss_of = [&](detseg::RetinaNetNetwork& net) {
    const detseg::DenseOutputs out = net->forward(images);
    return out.cls_logits.sigmoid().mean() + out.box_regression.square().mean();
  };
  plain->train();
  fast->train();
  const at::Tensor plain_loss = loss_of(plain), fast_loss = loss_of(fast);
  EXPECT_NEAR(fast_loss.item<float>(), plain_loss.item<float>(), 1e-5);
  plain_loss.backward();
  fast_loss.backward();
  const auto plain_params = plain->named_parameters(), fast_params = fast->named_parameters();
  int compared = 0;
  for (const auto& item : plain_params) {
    const at::Tensor b = item.value().grad();
    if (!b.defined()) continue;  // frozen stem and first stage
    const at::Tensor a = fast_params[item.key()].grad();
    ASSERT_TRUE(a.defined()) << item.key();
    EXPECT_LT(relative_difference(a, b), 1e-4) << item.key();
    ++compared;
  }
  EXPECT_GT(compared, 40);
  // Inference, where the oneDNN blocked path packs the channels-last weights.
  plain->eval();
  fast->eval();
  at::NoGradGuard no_grad;
  const detseg::DenseOutputs a = fast->forward(images), b = plain->forward(images);
  EXPECT_LT(relative_difference(a.cls_logits, b.cls_logits), 1e-4);
  EXPECT_LT(relative_difference(a.box_regression, b.box_regression), 1e-4);
}

TEST(FastPaths, ChannelsLastWeightsKeepDeepLabMobileNetsLossAndGradients) {
  // Depthwise convs (MobileNetV2), atrous convs, ASPP pooling and bilinear upsampling on NHWC.
  KeepFastPaths keep;
  const detseg::PipelineConfig config = detseg::parse_config(
      "model: {type: deeplabv3plus, backbone: mobilenet_v2, num_classes: 5, frozen_batch_norm: false,\n"
      "        deeplab: {output_stride: 16, crop_size: 96}}\n",
      "fast_paths.yaml");
  auto plain = detseg::build_segmenter(config), fast = detseg::build_segmenter(config);
  {
    at::NoGradGuard no_grad;  // the same weights in both (initialisation draws are not seeded here)
    const auto from = plain->named_parameters(), from_buffers = plain->named_buffers();
    for (auto& item : fast->named_parameters()) item.value().copy_(from[item.key()]);
    for (auto& item : fast->named_buffers()) item.value().copy_(from_buffers[item.key()]);
  }
  detseg::FastPathOptions on = detseg::fast_paths();
  on.channels_last_weights = true;
  detseg::set_fast_paths(on);
  EXPECT_GT(detseg::to_fast_weight_layout(fast->parameters()), 5);  // the 3x3 ones (1x1 weights are both layouts)
  detseg::Batch batch;
  batch.images = at::randn({2, 3, 96, 96}, at::Generator(at::detail::createCPUGenerator(11)));
  batch.image_sizes = at::full({2, 2}, 96, at::kLong);
  batch.original_sizes = batch.image_sizes.clone();
  batch.label_maps = at::randint(0, 5, {2, 96, 96}, at::Generator(at::detail::createCPUGenerator(12)), at::kLong);
  batch.image_ids = {1, 2};
  // Eval mode: the ASPP's dropout would draw its mask over each layout's memory order, so the two
  // runs would drop different activations; backward still runs through every conv.
  plain->eval();
  fast->eval();
  const at::Tensor plain_loss = plain->losses(batch).total, fast_loss = fast->losses(batch).total;
  EXPECT_NEAR(fast_loss.item<float>(), plain_loss.item<float>(), 1e-5 * std::max(1.0f, plain_loss.item<float>()));
  plain_loss.backward();
  fast_loss.backward();
  const auto fast_params = fast->named_parameters();
  int compared = 0;
  for (const auto& item : plain->named_parameters()) {
    const at::Tensor b = item.value().grad();
    if (!b.defined()) continue;
    const at::Tensor a = fast_params[item.key()].grad();
    ASSERT_TRUE(a.defined()) << item.key();
    EXPECT_LT(relative_difference(a, b), 1e-3) << item.key();
    ++compared;
  }
  EXPECT_GT(compared, 50);
}

// The GroupNorm head on channels-last weights: with group_norm_plain its GroupNorms run on a plain
// copy of their channels-last input (ATen's channels-last GroupNorm is ~10x slower); the loss, every
// gradient and the head's output layout downstream are those of the channels-last kernels.
TEST(FastPaths, GroupNormOnAPlainCopyTrainsAsTheChannelsLastKernel) {
  KeepFastPaths keep;
  auto make = [] {
    at::manual_seed(4);
    return detseg::RetinaNetNetwork(
        detseg::RetinaNetNetworkOptions(3).depth(18).fpn_channels(64).frozen_bn(false).head_group_norm_groups(32));
  };
  detseg::FastPathOptions options = detseg::fast_paths();
  options.channels_last_weights = true;
  detseg::set_fast_paths(options);
  detseg::RetinaNetNetwork plain_copy = make(), channels_last = make();
  detseg::to_fast_weight_layout(plain_copy->parameters());
  detseg::to_fast_weight_layout(channels_last->parameters());
  const at::Tensor images = at::randn({2, 3, 128, 160}, at::Generator(at::detail::createCPUGenerator(6)));
  auto loss_of = [&](detseg::RetinaNetNetwork& net, bool group_norm_plain) {
    detseg::FastPathOptions o = detseg::fast_paths();
    o.group_norm_plain = group_norm_plain;
    detseg::set_fast_paths(o);
    net->train();
    const detseg::DenseOutputs out = net->forward(images);
    return out.cls_logits.sigmoid().mean() + out.box_regression.square().mean();
  };
  // The switch does what it says: a channels-last activation is copied to plain, others pass.
  const at::Tensor nhwc = at::randn({1, 8, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast);
  options.group_norm_plain = true;
  detseg::set_fast_paths(options);
  EXPECT_TRUE(detseg::group_norm_input(nhwc).is_contiguous());
  options.group_norm_plain = false;
  detseg::set_fast_paths(options);
  EXPECT_FALSE(detseg::group_norm_input(nhwc).is_contiguous());

  const at::Tensor a = loss_of(plain_copy, true), b = loss_of(channels_last, false);
  EXPECT_NEAR(a.item<float>(), b.item<float>(), 1e-5);
  a.backward();
  b.backward();
  const auto pa = plain_copy->named_parameters(), pb = channels_last->named_parameters();
  int compared = 0;
  for (const auto& item : pb) {
    const at::Tensor gb = item.value().grad();
    if (!gb.defined()) continue;
    const at::Tensor ga = pa[item.key()].grad();
    ASSERT_TRUE(ga.defined()) << item.key();
    EXPECT_LT(relative_difference(ga, gb), 1e-4) << item.key();
    compared += item.key().find("head") != std::string::npos;
  }
  EXPECT_GE(compared, 20);  // the head's convs, GroupNorms and predictors among them
}

// Tests: shared layers (frozen / trainable batch norm, conv-bn-act naming, drop connect) and the
// state-dict loader's report.
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <set>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/state_dict.h"
#include "detseg/models/heads/retinanet_head.h"
#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/layers/drop_connect.h"
#include "detseg/models/layers/frozen_batch_norm.h"
#include "temp_dir.h"

namespace {

TEST(Norm2d, FrozenMatchesTorchvisionFormulaAndHoldsBuffersOnly) {
  auto bn = detseg::FrozenBatchNorm2d(3);
  EXPECT_EQ(bn->parameters().size(), 0u);
  EXPECT_EQ(bn->buffers().size(), 4u);  // weight, bias, running_mean, running_var
  EXPECT_EQ(bn->options.eps(), 1e-5);   // torchvision 0.14's FrozenBatchNorm2d default
  {
    at::NoGradGuard g;
    bn->weight.copy_(at::tensor({1.0f, 2.0f, 0.5f}));
    bn->bias.copy_(at::tensor({0.0f, 1.0f, -1.0f}));
    bn->running_mean.copy_(at::tensor({0.5f, -1.0f, 2.0f}));
    bn->running_var.copy_(at::tensor({4.0f, 1.0f, 0.25f}));
  }
  bn->train();  // frozen stays frozen in training
  at::Tensor x = at::randn({2, 3, 4, 5});
  at::Tensor scale = (bn->weight * (bn->running_var + 1e-5).rsqrt()).view({1, 3, 1, 1});
  at::Tensor shift = bn->bias.view({1, 3, 1, 1}) - bn->running_mean.view({1, 3, 1, 1}) * scale;
  EXPECT_TRUE(at::allclose(bn->forward(x), x * scale + shift, 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(bn->running_mean, at::tensor({0.5f, -1.0f, 2.0f})));
}

TEST(Norm2d, TrainableUpdatesStatistics) {
  detseg::Norm2d bn(detseg::Norm2dOptions(2));
  EXPECT_EQ(bn->parameters().size(), 2u);
  bn->train();
  at::Tensor x = at::randn({4, 2, 3, 3}) + 3.0;
  bn->forward(x);
  EXPECT_GT(bn->running_mean.min().item<float>(), 0.1f);  // moved 10% toward ~3
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  EXPECT_THROW(bn->forward(at::randn({1, 3, 2, 2})), c10::Error);
}

TEST(ConvBnAct, FrozenNormFoldTrainsLikeConvThenAffine) {
  // conv2d_norm folds a frozen norm into the conv and, in training, recomputes the fold in the
  // backward pass: values and gradients must be those of conv, then x * scale + shift.
  at::manual_seed(11);
  struct Case {
    int64_t kernel, stride, dilation, groups;
  };
  for (const Case& k : {Case{3, 1, 1, 1}, Case{3, 2, 1, 1}, Case{3, 1, 2, 1}, Case{1, 1, 1, 1}, Case{3, 1, 1, 2}}) {
    detseg::ConvBnAct m(detseg::ConvBnActOptions(4, 6, k.kernel)
                            .stride(k.stride)
                            .dilation(k.dilation)
                            .groups(k.groups)
                            .frozen_norm(true)
                            .activation(detseg::Activation::kNone));
    {
      at::NoGradGuard g;
      m->norm->weight.copy_(at::rand({6}) + 0.5);
      m->norm->bias.copy_(at::randn({6}));
      m->norm->running_mean.copy_(at::randn({6}));
      m->norm->running_var.copy_(at::rand({6}) + 0.5);
    }
    m->train();
    const at::Tensor x = at::randn({2, 4, 9, 8}).requires_grad_(true);
    const at::Tensor y = m->forward(x);
    const at::Tensor scale = (m->norm->weight * (m->norm->running_var + 1e-5).rsqrt()).view({1, 6, 1, 1});
    const at::Tensor shift = m->norm->bias.view({1, 6, 1, 1}) - m->norm->running_mean.view({1, 6, 1, 1}) * scale;
    const int64_t pad = k.dilation * (k.kernel - 1) / 2;
    const at::Tensor want = at::conv2d(x, m->conv->weight, {}, k.stride, pad, k.dilation, k.groups) * scale + shift;
    ASSERT_EQ(y.sizes(), want.sizes());
    EXPECT_TRUE(at::allclose(y, want, 1e-4, 1e-5));
    const at::Tensor dy = at::randn(y.sizes());
    const auto got = torch::autograd::grad({y}, {x, m->conv->weight}, {dy});
    const auto expected = torch::autograd::grad({want}, {x, m->conv->weight}, {dy});
    EXPECT_TRUE(at::allclose(got[0], expected[0], 1e-4, 1e-5)) << "input gradient, kernel " << k.kernel;
    EXPECT_TRUE(at::allclose(got[1], expected[1], 1e-4, 1e-4)) << "weight gradient, kernel " << k.kernel;
  }
}

TEST(ConvBnAct, NamesLikeTorchvisionConv2dNormActivation) {
  detseg::ConvBnAct m(detseg::ConvBnActOptions(3, 8, 3).stride(2));
  std::vector<std::string> keys;
  for (auto& p : m->named_parameters()) keys.push_back(p.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"0.weight", "1.weight", "1.bias"}));
  EXPECT_EQ(m->forward(at::randn({1, 3, 9, 9})).sizes(), (std::vector<int64_t>{1, 8, 5, 5}));
  detseg::ConvBnAct plain(detseg::ConvBnActOptions(3, 8, 1).norm(false));
  EXPECT_EQ(plain->named_parameters().size(), 2u);  // 0.weight, 0.bias
}

TEST(DropConnect, RowsDroppedOrScaled) {
  at::Tensor x = at::ones({64, 2, 3});
  EXPECT_TRUE(at::equal(detseg::drop_connect(x, 0.5, /*training=*/false), x));
  at::Tensor y = detseg::drop_connect(x, 0.5, true);
  for (int64_t i = 0; i < 64; ++i) {
    const float v = y[i][0][0].item<float>();
    EXPECT_TRUE(v == 0.0f || v == 2.0f);
    EXPECT_TRUE(at::equal(y[i], at::full({2, 3}, v)));  // one decision per sample
  }
  EXPECT_THROW(detseg::drop_connect(x, 1.0, true), c10::Error);
}

TEST(StateDict, ReportsLoadedMissingUnexpectedAndShape) {
  detseg::ConvBnAct m(detseg::ConvBnActOptions(2, 4, 3));
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  dict.insert("p.0.weight", at::full({4, 2, 3, 3}, 0.5));
  dict.insert("p.1.weight", at::full({5}, 1.0));  // wrong shape
  dict.insert("p.1.running_var", at::full({4}, 2.0));
  dict.insert("p.1.num_batches_tracked", at::zeros({}, at::kLong));
  dict.insert("p.extra", at::zeros({1}));
  const detseg::testing::TempDir dir_temp("test_state_dict");
  const auto dir = dir_temp.path();
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sd.pt").string();
  const std::vector<char> bytes = torch::jit::pickle_save(dict);
  detseg::write_file_atomic(path, std::string(bytes.begin(), bytes.end()));

  const detseg::StateDict sd = detseg::read_state_dict(path);
  EXPECT_EQ(sd.size(), 5u);
  detseg::StateDictLoadOptions opts;
  opts.strip_prefix = "p.";
  const auto report = detseg::load_state_dict(*m, sd, opts);
  EXPECT_EQ(report.loaded, (std::vector<std::string>{"0.weight", "1.num_batches_tracked", "1.running_var"}));
  EXPECT_EQ(report.missing, (std::vector<std::string>{"1.bias", "1.running_mean"}));
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"extra"}));
  ASSERT_EQ(report.shape_mismatch.size(), 1u);
  EXPECT_NE(report.shape_mismatch[0].find("1.weight"), std::string::npos);
  EXPECT_FALSE(report.complete());
  EXPECT_TRUE(at::equal(m->conv->weight, at::full({4, 2, 3, 3}, 0.5)));
  EXPECT_TRUE(at::equal(m->norm->running_var, at::full({4}, 2.0)));
  opts.strict = true;
  EXPECT_THROW(detseg::load_state_dict(*m, sd, opts), detseg::Error);
  EXPECT_THROW(detseg::read_state_dict((dir / "missing.pt").string()), detseg::Error);
}

// The RetinaNet subnets run in oneDNN's blocked layout at inference (conv2d_any_layout with packed
// weights); they must agree with the plain path, before and after the weights change.
TEST(RetinaNetHead, OneDnnInferencePathMatchesPlainPathAndTracksWeightChanges) {
  at::manual_seed(4);
  detseg::RetinaNetHead head(detseg::RetinaNetHeadOptions(16, 9, 3));
  head->eval();
  {
    at::NoGradGuard g;
    for (auto& p : head->parameters()) p.normal_(0, 0.2);  // the init's tiny weights would hide errors
  }
  const std::vector<at::Tensor> features = {at::randn({2, 16, 13, 17}), at::randn({2, 16, 7, 9}),
                                            at::randn({2, 16, 1, 1})};
  auto compare = [&] {
    at::Tensor plain_cls, plain_box;
    {
      at::AutoGradMode on(true);
      plain_cls = head->classification_head->forward(features);
      plain_box = head->regression_head->forward(features);
    }
    at::NoGradGuard g;
    if (!detseg::mkldnn_inference_enabled(features[0], false)) GTEST_SKIP() << "LibTorch built without oneDNN";
    const at::Tensor cls = head->classification_head->forward(features);
    const at::Tensor box = head->regression_head->forward(features);
    ASSERT_EQ(cls.sizes(), plain_cls.sizes());
    ASSERT_EQ(box.sizes(), plain_box.sizes());
    EXPECT_EQ(cls.sizes(), (std::vector<int64_t>{2, (13 * 17 + 7 * 9 + 1) * 9, 3}));
    EXPECT_LT((cls - plain_cls).abs().max().item<double>(), 1e-4 * plain_cls.abs().max().item<double>());
    EXPECT_LT((box - plain_box).abs().max().item<double>(), 1e-4 * plain_box.abs().max().item<double>());
  };
  compare();
  {
    at::NoGradGuard g;
    head->classification_head->convs[1]->conv->weight.mul_(-1.0);
    head->regression_head->predictor->bias.add_(5.0);
  }
  compare();  // a stale cached weight would differ here
}

TEST(RetinaNetHead, TrainingPathMatchesPerLevelDirectConvolution) {
  // The subnets' convs shared over three levels, forward and backward, against each level alone.
  at::manual_seed(5);
  detseg::RetinaNetHead head(detseg::RetinaNetHeadOptions(128, 9, 16));
  head->train();
  {
    at::NoGradGuard g;
    for (auto& p : head->parameters()) p.normal_(0, 0.05);
  }
  const std::vector<at::Tensor> features = {at::randn({4, 128, 24, 24}), at::randn({4, 128, 12, 11}),
                                            at::randn({4, 128, 3, 3})};
  auto direct = [&](detseg::RetinaNetSubnet& subnet) {
    std::vector<at::Tensor> outs;
    for (at::Tensor x : features) {
      for (auto& conv : subnet->convs) x = at::relu(at::conv2d(x, conv->conv->weight, conv->conv->bias, 1, 1));
      x = at::conv2d(x, subnet->predictor->weight, subnet->predictor->bias, 1, 1);
      outs.push_back(detseg::flatten_dense_prediction(x, subnet->outputs_per_anchor));
    }
    return at::cat(outs, 1);
  };
  for (auto* subnet : {&head->classification_head, &head->regression_head}) {
    const at::Tensor ours = (*subnet)->forward(features);
    const at::Tensor want = direct(*subnet);
    ASSERT_EQ(ours.sizes(), want.sizes());
    EXPECT_LT((ours - want).abs().max().item<double>(), 1e-4 * want.abs().max().item<double>());
    const at::Tensor r = at::randn(want.sizes());
    // The predictor's weight gradient to float rounding. The first conv's passes through four ReLUs,
    // where a pre-activation within rounding of 0 can fall on either side in the two computations
    // and switch that pixel's gradient on or off: a looser bound there (seen: 0.5 % of the largest).
    const at::Tensor& w_last = (*subnet)->predictor->weight;
    const at::Tensor& w_first = (*subnet)->convs[0]->conv->weight;
    const auto g_ours = torch::autograd::grad({(ours * r).sum()}, {w_last, w_first});
    const auto g_want = torch::autograd::grad({(want * r).sum()}, {w_last, w_first});
    EXPECT_LT((g_ours[0] - g_want[0]).abs().max().item<double>(), 1e-4 * g_want[0].abs().max().item<double>());
    EXPECT_LT((g_ours[1] - g_want[1]).abs().max().item<double>(), 2e-2 * g_want[1].abs().max().item<double>());
  }
}

}  // namespace

// head_norm group_norm: each conv of a subnet is followed by GroupNorm (child conv.i.1, torchvision
// v2's layout) per level and image, then ReLU; training and inference take the same path.
TEST(RetinaNetHead, GroupNormSubnetMatchesConvGroupNormReluByHand) {
  at::manual_seed(5);
  detseg::RetinaNetHead head(detseg::RetinaNetHeadOptions(8, 2, 3).num_convs(2).group_norm_groups(4));
  {
    at::NoGradGuard g;
    for (auto& p : head->parameters()) p.normal_(0, 0.3);
  }
  std::set<std::string> names;
  for (const auto& p : head->named_parameters()) names.insert(p.key());
  EXPECT_TRUE(names.count("classification_head.conv.1.1.weight"));
  EXPECT_TRUE(names.count("regression_head.conv.0.1.bias"));
  const std::vector<at::Tensor> features = {at::randn({2, 8, 6, 5}), at::randn({2, 8, 3, 3})};
  auto& subnet = head->classification_head;
  std::vector<at::Tensor> want;
  for (const at::Tensor& f : features) {
    at::Tensor x = f;
    for (size_t i = 0; i < subnet->convs.size(); ++i) {
      x = at::conv2d(x, subnet->convs[i]->conv->weight, subnet->convs[i]->conv->bias, 1, 1);
      x = at::relu(at::group_norm(x, 4, subnet->group_norms[i]->weight, subnet->group_norms[i]->bias, 1e-5));
    }
    x = at::conv2d(x, subnet->predictor->weight, subnet->predictor->bias, 1, 1);
    want.push_back(detseg::flatten_dense_prediction(x, 3));
  }
  const at::Tensor expected = at::cat(want, 1);
  for (bool training : {true, false}) {
    head->train(training);
    at::NoGradGuard g;
    const at::Tensor got = subnet->forward(features);
    ASSERT_EQ(got.sizes(), expected.sizes());
    EXPECT_LT((got - expected).abs().max().item<double>(), 1e-4 * expected.abs().max().item<double>()) << training;
  }
  EXPECT_THROW(detseg::RetinaNetHead(detseg::RetinaNetHeadOptions(8, 2, 3).group_norm_groups(3)), c10::Error);
}

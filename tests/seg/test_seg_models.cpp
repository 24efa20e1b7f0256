// Tests: DeepLab's network pieces. Parity with torchvision 0.14 (deeplabv3_resnet50's backbone at
// output stride 8 and its ASPP, mobilenet_v2's features) from state dicts made by
// tests/fixtures/make_seg_parity.py at test time (skipped with a message without the venv python (DETSEG_PYTHON)
// and torchvision); output strides and shapes; DeepLab's gradient multipliers on the right
// parameters; fine-tuning that leaves the last layers alone unless initialize_last_layer.
#include <gtest/gtest.h>

#include "peer_python.h"
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/module.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <array>
#include <filesystem>
#include <map>

#include "detseg/config/config.h"
#include "detseg/core/files.h"
#include "detseg/io/state_dict.h"
#include "detseg/models/backbones/mobilenet_v2.h"
#include "detseg/models/backbones/resnet.h"
#include "detseg/models/backbones/xception.h"
#include "detseg/models/build.h"
#include "detseg/models/deeplab_network.h"
#include "detseg/models/layers/conv_bn_act.h"
#include "detseg/models/meta_archs/semantic_segmenter.h"
#include "detseg/train/fine_tune.h"
#include "detseg/train/optimizer.h"
#include "temp_dir.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

using detseg::test::torchvision_available;

float max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<float>(); }
// ResNet-50 with random batch-norm statistics grows activations to ~2e3: compare relative to the
// largest magnitude (float32 rounding alone gives ~2e-6 there).
float max_rel_diff(const at::Tensor& a, const at::Tensor& b) { return max_abs_diff(a, b) / b.abs().max().item<float>(); }

TEST(SegParity, DeepLabV3ResNet50BackboneAndAsppMatchTorchvision) {
  if (!torchvision_available()) GTEST_SKIP() << DETSEG_PYTHON << " with torchvision not found: DeepLab parity not checked";
  const detseg::testing::TempDir dir_temp("seg_parity");
  const fs::path dir = dir_temp.path();
  fs::create_directories(dir);
  const std::string cmd =
      std::string(DETSEG_PYTHON) + " " + DETSEG_SOURCE_DIR + "/tests/fixtures/make_seg_parity.py " + dir.string() + " 65 81";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string io_bytes = detseg::read_file((dir / "io.pt").string());
  auto io = torch::jit::pickle_load(std::vector<char>(io_bytes.begin(), io_bytes.end())).toGenericDict();
  const at::Tensor x = io.at("input").toTensor();

  // torchvision's deeplabv3_resnet50 is DeepLabv3 at output stride 8; its classifier.0 is the ASPP.
  detseg::DeepLabNetwork net(detseg::DeepLabNetworkOptions(5).backbone("resnet50").output_stride(8).decoder(false));
  detseg::StateDict theirs = detseg::read_state_dict((dir / "deeplab_state_dict.pt").string());
  detseg::StateDict mapped;
  for (auto& [name, t] : theirs) {
    if (name.rfind("classifier.0.", 0) == 0) mapped["aspp." + name.substr(13)] = t;
    else if (name.rfind("backbone.", 0) == 0) mapped[name] = t;
  }
  const auto report = detseg::load_state_dict(*net, mapped);
  // Everything but our own 1x1 classifier (torchvision's head differs after the ASPP) loads.
  EXPECT_TRUE(report.unexpected.empty() && report.shape_mismatch.empty()) << report.summary();
  std::vector<std::string> missing = report.missing;
  std::sort(missing.begin(), missing.end());
  EXPECT_EQ(missing, (std::vector<std::string>{"classifier.bias", "classifier.weight"})) << report.summary();
  int64_t params = 0;
  for (auto& p : net->backbone->parameters()) params += p.numel();
  for (auto& p : net->aspp->parameters()) params += p.numel();
  EXPECT_EQ(params, io.at("num_params").toTensor().item<int64_t>());

  net->eval();
  at::NoGradGuard g;
  const at::Tensor feat = net->features(x).back();
  const at::Tensor want_feat = io.at("backbone_out").toTensor();
  ASSERT_EQ(feat.sizes(), want_feat.sizes());
  EXPECT_LT(max_rel_diff(feat, want_feat), 1e-5);
  const at::Tensor aspp = net->aspp->forward(want_feat);
  const at::Tensor want_aspp = io.at("aspp_out").toTensor();
  ASSERT_EQ(aspp.sizes(), want_aspp.sizes());
  EXPECT_LT(max_rel_diff(aspp, want_aspp), 1e-5);

  // MobileNetV2 at output stride 32 is torchvision's mobilenet_v2 features.0..17.
  detseg::MobileNetV2 mobilenet(detseg::MobileNetV2Options().returned_blocks({17}));
  const auto mreport =
      detseg::load_state_dict(*mobilenet, detseg::read_state_dict((dir / "mobilenet_state_dict.pt").string()));
  EXPECT_TRUE(mreport.missing.empty() && mreport.shape_mismatch.empty()) << mreport.summary();
  mobilenet->eval();
  const at::Tensor mob = mobilenet->forward(x).back();
  const at::Tensor want_mob = io.at("mobilenet_out").toTensor();
  ASSERT_EQ(mob.sizes(), want_mob.sizes());
  EXPECT_LT(max_abs_diff(mob, want_mob), 1e-4);
  fs::remove_all(dir);
}

TEST(SegModels, OutputStridesAndLogitShapes) {
  at::NoGradGuard g;
  const at::Tensor x = at::randn({1, 3, 64, 96});
  for (int64_t os : {8, 16, 32}) {
    detseg::DeepLabNetwork r(detseg::DeepLabNetworkOptions(3).backbone("resnet18").output_stride(os).aspp_channels(16)
                                 .decoder_channels(16).low_level_channels(8));
    r->eval();
    auto maps = r->features(x);
    ASSERT_EQ(maps.size(), 2u);
    EXPECT_EQ(maps[0].sizes(), (std::vector<int64_t>{1, 64, 16, 24}));
    EXPECT_EQ(maps[1].sizes(), (std::vector<int64_t>{1, 512, 64 / os, 96 / os})) << "output stride " << os;
    EXPECT_EQ(r->forward(x).sizes(), (std::vector<int64_t>{1, 3, 16, 24}));  // decoder: stride 4
    detseg::DeepLabNetwork m(detseg::DeepLabNetworkOptions(3).backbone("mobilenet_v2").output_stride(os)
                                 .aspp_channels(16).decoder(false));
    m->eval();
    EXPECT_EQ(m->features(x).back().sizes(), (std::vector<int64_t>{1, 320, 64 / os, 96 / os}));
    EXPECT_EQ(m->forward(x).sizes(), (std::vector<int64_t>{1, 3, 64 / os, 96 / os}));
  }
  EXPECT_EQ(detseg::aspp_rates_for_output_stride(16), (std::vector<int64_t>{6, 12, 18}));
  // Xception-65 as DeepLab: 256-channel stride-4 features, 2048 channels at the output stride.
  for (int64_t os : {8, 16}) {
    detseg::DeepLabNetwork x65(detseg::DeepLabNetworkOptions(3).backbone("xception65").output_stride(os)
                                   .aspp_channels(16).decoder_channels(16).low_level_channels(8));
    x65->eval();
    auto maps = x65->features(x);
    EXPECT_EQ(maps[0].sizes(), (std::vector<int64_t>{1, 256, 16, 24}));
    EXPECT_EQ(maps[1].sizes(), (std::vector<int64_t>{1, 2048, 64 / os, 96 / os}));
    EXPECT_EQ(x65->forward(x).sizes(), (std::vector<int64_t>{1, 3, 16, 24}));
  }
  EXPECT_EQ(detseg::aspp_rates_for_output_stride(8), (std::vector<int64_t>{12, 24, 36}));
  // ResNet-50 at stride 16 dilates layer4 only: its first block keeps dilation 1, the rest 2.
  detseg::DeepLabNetwork r50(detseg::DeepLabNetworkOptions(3).backbone("resnet50").output_stride(16));
  auto& resnet = dynamic_cast<detseg::ResNetImpl&>(*r50->backbone);
  EXPECT_EQ((*resnet.stages[3][0]->conv2->options.dilation())[0], 1);
  EXPECT_EQ((*resnet.stages[3][1]->conv2->options.dilation())[0], 2);
  EXPECT_EQ((*resnet.stages[3][0]->conv2->options.stride())[0], 1);
  EXPECT_EQ((*resnet.stages[2][0]->conv2->options.stride())[0], 2);
}

// Inference without autograd runs the ResNet body, the ASPP and the decoder convs in oneDNN's
// blocked layout with folded, cached weights; with autograd on, everything runs the plain path.
// Logits must agree (DeepLabv3+ and v3, output strides 8 and 16, batch 2 so the image pooling
// branch sees two different images), and the blocked path must really have run in the heads.
// A dilated 3x3 conv whose rate reaches the map's height and width runs as its centre tap there:
// at 65x97 the last features are 9x13 (os 8: rates 24 and 36 do) or 5x7 (os 16: rates 12 and 18);
// at 193x193 they are 25x25 (os 8: only 36) or 13x13 (os 16: only 18), so the second dilated
// branch switches packings between sizes, and back, and must stay right each time.
TEST(SegModels, OneDnnInferencePathMatchesPlainPath) {
  at::manual_seed(11);
  const at::Tensor small = at::randn({2, 3, 65, 97}), large = at::randn({1, 3, 193, 193});
  for (int64_t os : {8, 16}) {
    for (bool decoder : {true, false}) {
      SCOPED_TRACE("output stride " + std::to_string(os) + (decoder ? ", decoder" : ", no decoder"));
      detseg::DeepLabNetwork net(
          detseg::DeepLabNetworkOptions(5).backbone("resnet50").output_stride(os).decoder(decoder));
      {
        at::NoGradGuard g;
        for (auto& b : net->named_buffers()) {
          if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
          if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0, 0.1);
        }
        for (auto& p : net->named_parameters()) {
          if (p.value().dim() != 1) continue;  // norm scales off 1, non-zero shifts and conv biases
          if (p.key().find("weight") != std::string::npos) p.value().uniform_(0.5, 1.5);
          else p.value().normal_(0, 0.1);
        }
      }
      net->eval();
      // Whether ASPP branch b's cached packing is its centre tap (the last made_from entry).
      auto centre_tap = [&](size_t b) { return net->aspp->branches[b]->norm->packed_conv.made_from.back().second == 1; };
      auto compare = [&](const at::Tensor& x, const char* size) {
        at::Tensor plain;
        {
          at::AutoGradMode on(true);
          ASSERT_FALSE(detseg::mkldnn_inference_enabled(x, false));
          plain = net->forward(x).detach();
        }
        at::NoGradGuard g;
        if (!detseg::mkldnn_inference_enabled(x, false)) GTEST_SKIP() << "LibTorch built without oneDNN";
        const at::Tensor blocked = net->forward(x);
        EXPECT_FALSE(blocked.is_mkldnn());
        ASSERT_EQ(blocked.sizes(), plain.sizes());
        const double rel = max_rel_diff(blocked, plain);
        std::printf("os %lld %s %s: blocked vs plain logits, max |diff| / max |logit| = %.3g\n",
                    static_cast<long long>(os), decoder ? "v3+" : "v3", size, rel);
        EXPECT_LT(rel, 1e-4) << size;
        // The folded weights are cached only by the blocked path.
        EXPECT_TRUE(net->aspp->branches[1]->norm->packed_conv.weight.defined());
        EXPECT_TRUE(net->aspp->project->norm->packed_conv.weight.defined());
        if (decoder) {
          EXPECT_TRUE(net->decoder->fuse1->norm->packed_conv.weight.defined());
        }
      };
      compare(small, "65x97");
      EXPECT_FALSE(centre_tap(1));
      EXPECT_TRUE(centre_tap(2));
      EXPECT_TRUE(centre_tap(3));
      if (!decoder) continue;  // the switch once per output stride is enough
      compare(large, "193x193");
      EXPECT_FALSE(centre_tap(2));
      EXPECT_TRUE(centre_tap(3));
      compare(small, "65x97 again");
      EXPECT_TRUE(centre_tap(2));
    }
  }
}

// Xception-65 against DeepLab's own layer table (tensorflow/models research/deeplab/core/xception.py,
// xception_65_factory): per block the depth_list, skip_connection_type, num_units, stride and
// activation_fn_in_separable_conv. Our modules must carry those channels, shortcuts and strides, and
// our trainable parameter count must equal the one the reference's variables give: root convs
// conv1_1 (3x3, 32) and conv1_2 (3x3, 64), each separable conv = depthwise 3x3 weights + batch norm
// (gamma, beta) and pointwise 1x1 weights + batch norm, a 'conv' shortcut = 1x1 weights + batch
// norm; no biases (slim's convs with a normalizer have none). That is 37,867,312 parameters.
// Dilation per module follows stack_blocks_dense: once the output stride is reached, strides
// become 1 and the rate grows by each skipped stride (here worked out by hand per output stride).
TEST(SegModels, XceptionMatchesDeepLabLayerTable) {
  struct Block {
    std::array<int64_t, 3> depths;
    detseg::XceptionSkip skip;
    int units;
    int64_t stride;
    bool relu_inside;
  };
  using S = detseg::XceptionSkip;
  const std::vector<Block> table = {{{128, 128, 128}, S::kConv, 1, 2, false},  // entry_flow/block1
                                    {{256, 256, 256}, S::kConv, 1, 2, false},  // entry_flow/block2
                                    {{728, 728, 728}, S::kConv, 1, 2, false},  // entry_flow/block3
                                    {{728, 728, 728}, S::kSum, 16, 1, false},  // middle_flow/block1
                                    {{728, 1024, 1024}, S::kConv, 1, 2, false},  // exit_flow/block1
                                    {{1536, 1536, 2048}, S::kNone, 1, 1, true}};  // exit_flow/block2
  auto bn = [](int64_t c) { return 2 * c; };
  int64_t want_params = 3 * 3 * 3 * 32 + bn(32) + 3 * 3 * 32 * 64 + bn(64);
  // Per module: {stride, dilation} at output stride 32, 16, 8 (entry, middle x16, exit).
  std::vector<std::array<std::pair<int64_t, int64_t>, 3>> want_stride_rate;
  for (size_t b = 0; b < table.size(); ++b)
    for (int u = 0; u < table[b].units; ++u) {
      if (b < 2) want_stride_rate.push_back({{{2, 1}, {2, 1}, {2, 1}}});
      else if (b == 2) want_stride_rate.push_back({{{2, 1}, {2, 1}, {1, 1}}});
      else if (b == 3) want_stride_rate.push_back({{{1, 1}, {1, 1}, {1, 2}}});
      else if (b == 4) want_stride_rate.push_back({{{2, 1}, {1, 1}, {1, 2}}});
      else want_stride_rate.push_back({{{1, 1}, {1, 2}, {1, 4}}});
    }
  const std::array<int64_t, 3> output_strides = {32, 16, 8};
  for (size_t o = 0; o < output_strides.size(); ++o) {
    SCOPED_TRACE("output stride " + std::to_string(output_strides[o]));
    detseg::Xception net(detseg::XceptionOptions().output_stride(output_strides[o]));
    ASSERT_EQ(net->blocks.size(), want_stride_rate.size());
    EXPECT_EQ((*net->conv1->conv->options.stride())[0], 2);
    EXPECT_EQ(net->conv1->conv->weight.sizes(), (std::vector<int64_t>{32, 3, 3, 3}));
    EXPECT_EQ(net->conv2->conv->weight.sizes(), (std::vector<int64_t>{64, 32, 3, 3}));
    int64_t in = 64;
    size_t m = 0;
    for (const Block& block : table)
      for (int u = 0; u < block.units; ++u, ++m) {
        SCOPED_TRACE("module " + std::to_string(m));
        const detseg::XceptionModuleImpl& module = *net->blocks[m];
        EXPECT_EQ(module.skip, block.skip);
        EXPECT_EQ(module.relu_inside, block.relu_inside);
        EXPECT_EQ(static_cast<bool>(module.shortcut), block.skip == S::kConv);
        int64_t c = in;
        for (int i = 0; i < 3; ++i) {
          const auto& sep = *module.convs[static_cast<size_t>(i)];
          EXPECT_EQ(sep.depthwise->conv->weight.sizes(), (std::vector<int64_t>{c, 1, 3, 3}));
          EXPECT_EQ(sep.pointwise->conv->weight.sizes(), (std::vector<int64_t>{block.depths[i], c, 1, 1}));
          EXPECT_EQ((*sep.depthwise->conv->options.stride())[0], i == 2 ? want_stride_rate[m][o].first : 1) << i;
          EXPECT_EQ((*sep.depthwise->conv->options.dilation())[0], want_stride_rate[m][o].second) << i;
          if (o == 0) want_params += 9 * c + bn(c) + c * block.depths[i] + bn(block.depths[i]);
          c = block.depths[i];
        }
        if (block.skip == S::kConv && o == 0) want_params += in * c + bn(c);
        in = c;
      }
    int64_t params = 0;
    for (auto& p : net->parameters()) params += p.numel();
    EXPECT_EQ(params, want_params);
  }
  std::printf("Xception-65: %lld trainable parameters, as DeepLab's layer table gives\n",
              static_cast<long long>(want_params));
}

detseg::PipelineConfig small_config(const std::string& extra) {
  return detseg::parse_config(
      "model: {type: deeplabv3plus, num_classes: 4, backbone: resnet18, frozen_batch_norm: false,\n"
      "        deeplab: {aspp_channels: 16, decoder_channels: 16, low_level_channels: 8" + extra + "}}\n",
      "seg.yaml");
}

TEST(SegModels, GradientMultipliersHitLastLayersAndBiases) {
  const detseg::PipelineConfig config = small_config(", last_layer_gradient_multiplier: 10");
  auto model = detseg::build_model(config);
  detseg::OptimizerOptions o;
  o.multipliers = detseg::model_gradient_multipliers(config);
  const detseg::ParameterSelection sel = detseg::select_parameters(*model, o);
  std::map<std::string, double> scale;
  for (const auto& p : sel.trainable) scale[p.name] = p.lr_scale;
  EXPECT_EQ(scale.at("backbone.layer1.0.conv1.weight"), 1.0);
  EXPECT_EQ(scale.at("backbone.bn1.weight"), 1.0);
  EXPECT_EQ(scale.at("backbone.bn1.bias"), 2.0);              // a bias: x2
  EXPECT_EQ(scale.at("aspp.convs.1.0.weight"), 10.0);         // last layers: x10
  EXPECT_EQ(scale.at("decoder.fuse.0.0.weight"), 10.0);
  EXPECT_EQ(scale.at("classifier.weight"), 10.0);
  EXPECT_EQ(scale.at("classifier.bias"), 20.0);               // a last-layer bias: 2 x 10
  int64_t last = 0;
  for (const auto& [name, s] : scale) last += s >= 10.0;
  EXPECT_GT(last, 20);
  // Off: no rules at all.
  EXPECT_TRUE(detseg::model_gradient_multipliers(small_config(", gradient_multipliers: false")).empty());
}

detseg::NamedTensors module_state(torch::nn::Module& m) {
  detseg::NamedTensors out;
  for (auto& p : m.named_parameters()) out.push_back({p.key(), p.value().detach().clone()});
  for (auto& b : m.named_buffers()) out.push_back({b.key(), b.value().clone()});
  return out;
}

TEST(SegModels, FineTuneSkipsLastLayersUnlessInitializeLastLayer) {
  const detseg::PipelineConfig config = small_config(", initialize_last_layer: false");
  auto source = detseg::build_model(config);
  auto target = detseg::build_model(config);
  const detseg::NamedTensors state = module_state(*source);
  detseg::FineTuneOptions o;
  o.load_all_detection_vars = true;
  o.exclude_pattern = detseg::model_fine_tune_exclude(config);
  EXPECT_EQ(o.exclude_pattern, R"(aspp\.|decoder\.|classifier\.)");
  const auto summary = detseg::apply_fine_tune(*target, state, o);
  auto params = target->named_parameters();
  auto src = source->named_parameters();
  EXPECT_TRUE(at::equal(params["backbone.conv1.weight"], src["backbone.conv1.weight"]));
  EXPECT_FALSE(at::equal(params["classifier.weight"], src["classifier.weight"]));
  EXPECT_FALSE(at::equal(params["aspp.convs.0.0.weight"], src["aspp.convs.0.0.weight"]));
  for (const auto& name : summary.loaded) EXPECT_EQ(name.rfind("backbone.", 0), 0u) << name;
  // initialize_last_layer (DeepLab's default): nothing excluded.
  EXPECT_EQ(detseg::model_fine_tune_exclude(small_config("")), "");
}

TEST(SegModels, SegmentReturnsFullResolutionMapsWithScalesAndFlips) {
  detseg::PipelineConfig config = small_config(", eval_scales: [0.75, 1.0], eval_flip: true");
  auto model = detseg::build_segmenter(config);
  model->eval();
  at::NoGradGuard g;
  detseg::Batch batch;
  batch.images = at::randn({1, 3, 40, 56});
  batch.image_sizes = at::tensor({40, 50}, at::kLong).reshape({1, 2});  // 6 columns of padding
  batch.original_sizes = at::tensor({40, 50}, at::kLong).reshape({1, 2});
  batch.image_ids = {0};
  auto maps = model->segment(batch);
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].sizes(), (std::vector<int64_t>{40, 50}));
  EXPECT_GE(maps[0].min().item<int64_t>(), 0);
  EXPECT_LT(maps[0].max().item<int64_t>(), 4);
  // The probabilities average 2 scales x 2 flips of softmaxes: they sum to 4 per pixel.
  auto& seg = dynamic_cast<detseg::SemanticSegmenterImpl&>(*model);
  const at::Tensor p = seg.probabilities(batch.images.slice(3, 0, 50), 40, 50);
  EXPECT_LT((p.sum(1) - 4).abs().max().item<float>(), 1e-4);
}

}  // namespace

// Implements: tests of fine-tune loading: detection vs classification scope, scope maps,
// exclusions, missing and mismatched tensors, our checkpoints (model or EMA) and .pth files,
// and the rule that a model_dir with its own checkpoint is never fine-tuned.
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/io/safetensors.h"
#include "detseg/train/checkpoint.h"
#include "detseg/train/fine_tune.h"
#include "tiny_modules.h"
#include "test_paths.h"

namespace detseg {
namespace {
namespace fs = std::filesystem;
using testing::TinyNet;

// backbone.{fc1,bn,head}.* (9 tensors with the BN buffers) and head.{weight,bias} [3,2], [3].
struct DetectorImpl : torch::nn::Module {
  DetectorImpl()
      : backbone(register_module("backbone", TinyNet())),
        head(register_module("head", torch::nn::Linear(2, 3))) {}
  TinyNet backbone;
  torch::nn::Linear head;
};
TORCH_MODULE(Detector);

NamedTensors tiny_source() {  // a "classification" checkpoint: the backbone's own names
  TinyNet src;
  testing::fill_tiny(*src);
  return module_state(*src);
}

TEST(FineTune, ClassificationWithPrefixMap) {
  Detector det;
  FineTuneOptions o;
  o.type = "classification";
  o.scope_map = {{R"(^backbone\.)", ""}};
  const auto s = apply_fine_tune(*det, tiny_source(), o);
  EXPECT_EQ(s.loaded.size(), 9u);
  EXPECT_EQ(s.outside_scope, 2u);  // head.weight, head.bias
  EXPECT_TRUE(s.skipped.empty());
  EXPECT_EQ(s.unused_in_checkpoint, 0u);
  EXPECT_TRUE(torch::equal(det->backbone->fc1->weight, torch::tensor({{1.f, 2.f}, {3.f, 4.f}})));
  EXPECT_NE(s.to_string().find("loaded 9"), std::string::npos) << s.to_string();
}

TEST(FineTune, DetectionAllVariablesWithExclusion) {
  Detector src;
  testing::fill_tiny(*src->backbone);
  {
    torch::NoGradGuard g;
    src->head->weight.fill_(9.f);
  }
  Detector det;
  const torch::Tensor head_before = det->head->weight.clone();
  FineTuneOptions o;
  o.load_all_detection_vars = true;
  o.exclude_pattern = R"(^head\.)";  // the last layers, as DeepLab's initialize_last_layer=false
  const auto s = apply_fine_tune(*det, module_state(*src), o);
  EXPECT_EQ(s.loaded.size(), 9u);
  ASSERT_EQ(s.skipped.size(), 2u);
  EXPECT_EQ(s.skipped[0].first, "head.weight");
  EXPECT_EQ(s.skipped[0].second, "excluded by pattern");
  EXPECT_EQ(s.unused_in_checkpoint, 2u);
  EXPECT_TRUE(torch::equal(det->head->weight, head_before));
  EXPECT_TRUE(torch::equal(det->backbone->head->bias, torch::tensor({0.25f})));
  // Without load_all only the feature extractor is restored.
  o.load_all_detection_vars = false;
  o.exclude_pattern.clear();
  const auto f = apply_fine_tune(*det, module_state(*src), o);
  EXPECT_EQ(f.loaded.size(), 9u);
  EXPECT_EQ(f.outside_scope, 2u);
}

TEST(FineTune, MissingTensorsErrorUnlessSkipped) {
  NamedTensors source = tiny_source();
  source.erase(source.begin() + 1);  // fc1.bias
  Detector det;
  FineTuneOptions o;
  o.type = "classification";
  o.checkpoint = "ckpt.pth";
  o.scope_map = {{R"(^backbone\.)", ""}};
  o.skip_missing = false;
  try {
    apply_fine_tune(*det, source, o);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ckpt.pth"), std::string::npos) << msg;
    EXPECT_NE(msg.find("backbone.fc1.bias (as 'fc1.bias')"), std::string::npos) << msg;
  }
  const torch::Tensor untouched = det->backbone->fc1->weight.clone();
  EXPECT_TRUE(torch::equal(det->backbone->fc1->weight, untouched));  // nothing copied on error
  o.skip_missing = true;
  const auto s = apply_fine_tune(*det, source, o);
  EXPECT_EQ(s.loaded.size(), 8u);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_NE(s.skipped[0].second.find("not in checkpoint"), std::string::npos);
}

TEST(FineTune, ShapeMismatchReported) {
  Detector src;
  src->head = src->replace_module("head", torch::nn::Linear(2, 5));  // 5 classes vs our 3
  Detector det;
  FineTuneOptions o;
  o.load_all_detection_vars = true;
  EXPECT_THROW(apply_fine_tune(*det, module_state(*src), o), Error);
  o.skip_mismatched = true;
  const auto s = apply_fine_tune(*det, module_state(*src), o);
  EXPECT_EQ(s.loaded.size(), 9u);
  ASSERT_EQ(s.mismatched.size(), 2u);
  EXPECT_NE(s.mismatched[0].find("head.weight: [3, 2] vs checkpoint 'head.weight': [5, 2]"),
            std::string::npos)
      << s.mismatched[0];
}

TEST(FineTune, FromOurCheckpointAndFromPth) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_ft_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Detector src;
  testing::fill_tiny(*src->backbone);
  Checkpoint c;
  c.model = module_state(*src);
  for (const auto& kv : c.model)
    if (kv.second.is_floating_point())
      c.ema.emplace_back(kv.first, torch::full_like(kv.second, 0.5));
  const std::string path = (dir / "ckpt-1.dsckpt").string();
  write_checkpoint(path, c);
  Detector det;
  FineTuneOptions o;
  o.checkpoint = path;
  o.load_all_detection_vars = true;
  EXPECT_EQ(fine_tune_from_checkpoint(*det, o).loaded.size(), 11u);  // 8 params + 3 BN buffers
  EXPECT_TRUE(torch::equal(det->backbone->fc1->weight, src->backbone->fc1->weight));
  o.use_ema = true;
  fine_tune_from_checkpoint(*det, o);
  EXPECT_TRUE(torch::equal(det->backbone->fc1->weight, torch::full({2, 2}, 0.5f)));

  // The same weights exported as safetensors.
  const std::string st = (dir / "weights.safetensors").string();
  write_safetensors(st, module_state(*src));
  Detector from_st;
  o.checkpoint = st;
  EXPECT_EQ(fine_tune_from_checkpoint(*from_st, o).loaded.size(), 11u);
  EXPECT_TRUE(torch::equal(from_st->head->weight, src->head->weight));

  // torchvision-style import: the nested .pth's "model" dict into a Sequential under "backbone".
  struct Holder : torch::nn::Module {
    torch::nn::Sequential backbone{torch::nn::Conv2d(2, 3, 1), torch::nn::BatchNorm2d(3),
                                   torch::nn::Linear(3, 2)};
    Holder() { register_module("backbone", backbone); }
  } holder;
  FineTuneOptions p;
  p.checkpoint = std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/pth/checkpoint.pth";
  p.type = "classification";
  p.scope_map = {{R"(^backbone\.)", ""}};
  const auto s = fine_tune_from_checkpoint(holder, p);
  EXPECT_EQ(s.loaded.size(), 9u);
  EXPECT_TRUE(torch::equal(holder.backbone->ptr(2)->as<torch::nn::Linear>()->bias,
                           torch::tensor({5.f, 5.5f})));
  fs::remove_all(dir);
}

TEST(FineTune, NeverWhenModelDirHasACheckpoint) {
  const fs::path dir = fs::temp_directory_path() / ("detseg_ft_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  FineTuneOptions o;
  EXPECT_FALSE(should_fine_tune(o, dir.string()));  // nothing configured
  o.checkpoint = "backbone.pth";
  EXPECT_TRUE(should_fine_tune(o, dir.string()));  // fresh run
  CheckpointManager({dir.string(), 7, 1}).save(Checkpoint{});
  EXPECT_FALSE(should_fine_tune(o, dir.string()));  // resuming: keep our own weights
  fs::remove_all(dir);
  o.type = "segmentation";
  Detector det;
  EXPECT_THROW(apply_fine_tune(*det, {}, o), ConfigError);
}

}  // namespace
}  // namespace detseg

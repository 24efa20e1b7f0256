// Implements: tests of the torch.save reader against fixtures written by
// tests/fixtures/make_pth_fixtures.py (values are deterministic ranges, restated here).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/pth_reader.h"
#include "test_paths.h"

namespace detseg {
namespace {

std::string fixture(const std::string& name) {
  return std::string(DETSEG_SOURCE_DIR) + "/tests/fixtures/pth/" + name;
}

const at::Tensor& get(const NamedTensors& sd, const std::string& name) {
  for (const auto& kv : sd)
    if (kv.first == name) return kv.second;
  throw std::runtime_error("no " + name);
}

void expect_sequential_state(const NamedTensors& sd) {
  std::vector<std::string> names;
  for (const auto& kv : sd) names.push_back(kv.first);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                             "1.running_mean", "1.running_var",
                                             "1.num_batches_tracked", "2.weight", "2.bias"}));
  // parameter i = arange(numel) * 0.5 + i
  EXPECT_EQ(get(sd, "0.weight").sizes(), (std::vector<int64_t>{3, 2, 1, 1}));
  EXPECT_TRUE(at::equal(get(sd, "0.weight").flatten(), at::arange(6, at::kFloat) * 0.5));
  EXPECT_TRUE(at::equal(get(sd, "0.bias"), at::arange(3, at::kFloat) * 0.5 + 1));
  EXPECT_TRUE(
      at::equal(get(sd, "2.weight"), (at::arange(6, at::kFloat) * 0.5 + 4).reshape({2, 3})));
  EXPECT_TRUE(at::equal(get(sd, "2.bias"), at::arange(2, at::kFloat) * 0.5 + 5));
  EXPECT_TRUE(at::allclose(get(sd, "1.running_mean"), at::tensor({0.1f, 0.2f, 0.3f})));
  EXPECT_TRUE(at::equal(get(sd, "1.running_var"), at::ones({3})));
  EXPECT_EQ(get(sd, "1.num_batches_tracked").scalar_type(), at::kLong);
  EXPECT_EQ(get(sd, "1.num_batches_tracked").dim(), 0);
  EXPECT_EQ(get(sd, "1.num_batches_tracked").item<int64_t>(), 7);
}

TEST(PthReader, SequentialStateDict) {
  expect_sequential_state(read_pth_state_dict(fixture("sequential.pth")));
}

TEST(PthReader, DtypesAndViewsSharingStorage) {
  const NamedTensors sd = read_pth_state_dict(fixture("mixed.pth"));
  EXPECT_TRUE(at::equal(get(sd, "f32"), at::tensor({1.5f, -2.25f, 3.f})));
  const at::Tensor& i64 = get(sd, "i64");
  EXPECT_EQ(i64.scalar_type(), at::kLong);
  EXPECT_EQ(i64[1][1].item<int64_t>(), int64_t(1) << 40);
  EXPECT_EQ(i64[0][1].item<int64_t>(), -2);
  const at::Tensor& f16 = get(sd, "f16");
  EXPECT_EQ(f16.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(f16.to(at::kFloat), at::tensor({0.5f, 1.f, -65504.f})));
  EXPECT_TRUE(at::equal(get(sd, "u8"), at::tensor({0, 255, 7}, at::kByte)));
  EXPECT_EQ(get(sd, "scalar").dim(), 0);
  EXPECT_EQ(get(sd, "scalar").item<double>(), 4.0);
  const at::Tensor& base = get(sd, "base");
  const at::Tensor& t = get(sd, "transposed");
  const at::Tensor& slice = get(sd, "row_slice");
  EXPECT_TRUE(at::equal(t, base.t()));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(at::equal(slice, at::tensor({5.f, 6.f, 9.f, 10.f}).reshape({2, 2})));
  EXPECT_EQ(slice.storage_offset(), 5);
  EXPECT_TRUE(t.is_alias_of(base));  // one storage, as saved
  EXPECT_TRUE(slice.is_alias_of(base));
}

TEST(PthReader, NestedCheckpointDict) {
  const PickleRef root = read_pth(fixture("checkpoint.pth"));
  ASSERT_EQ(root->kind, PickleValue::Kind::kDict);
  ASSERT_NE(root->find("epoch"), nullptr);
  EXPECT_EQ(root->find("epoch")->i, 3);
  EXPECT_DOUBLE_EQ(root->find("lr")->f, 0.01);
  EXPECT_EQ(root->find("name")->s, "tiny");
  ASSERT_EQ(root->find("steps")->items.size(), 2u);
  EXPECT_EQ(root->find("steps")->items[1]->i, 2);
  EXPECT_EQ(root->find("missing"), nullptr);
  // Found automatically under "model", or by key.
  expect_sequential_state(read_pth_state_dict(fixture("checkpoint.pth")));
  expect_sequential_state(read_pth_state_dict(fixture("checkpoint.pth"), "model"));
  const NamedTensors flat = flatten_tensors(*root);
  ASSERT_EQ(flat.size(), 9u);
  EXPECT_EQ(flat[0].first, "model.0.weight");
  EXPECT_THROW(read_pth_state_dict(fixture("checkpoint.pth"), "optimizer"), Error);
}

void expect_error(const std::string& path, const std::string& needle) {
  try {
    read_pth(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

// The message is ours alone: nothing of LibTorch's or miniz's text ("PytorchStreamReader", "miniz").
void expect_no_library_text(const std::string& path) {
  try {
    read_pth(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find("PytorchStreamReader"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("miniz"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(PthReader, TruncatedForeignCompressedAndLegacyFiles) {
  const std::string bytes = read_file(fixture("mixed.pth"));
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string cut = dir + "/detseg_cut_" + std::to_string(::getpid()) + ".pth";
  for (size_t len : {size_t(0), size_t(10), size_t(100), bytes.size() / 2, bytes.size() - 30,
                     bytes.size() - 1}) {
    SCOPED_TRACE(len);
    write_file_atomic(cut, bytes.substr(0, len));
    expect_error(cut, ": truncated or not a torch.save zip file (");
    // miniz's own words stay out of the message; ours say what is wrong.
    expect_error(cut, len == 0 ? "an empty file" : len < 22 ? "only 10 bytes" : "cut short");
    expect_no_library_text(cut);
  }
  write_file_atomic(cut, "just some text, long enough to look for a zip directory in it.");
  expect_error(cut, ": truncated or not a torch.save zip file (");
  expect_no_library_text(cut);
  write_file_atomic(cut, std::string("\x80\x02\x8a\x0a", 4) + "legacy torch.save");
  expect_error(cut, "legacy");
  std::remove(cut.c_str());
}

// torch.save never deflates, but zip tools do when a file is re-packed; LibTorch's reader inflates.
TEST(PthReader, DeflatedArchiveReadsLikeTheStoredOne) {
  const NamedTensors stored = read_pth_state_dict(fixture("mixed.pth"));
  const NamedTensors deflated = read_pth_state_dict(fixture("deflated.pth"));
  ASSERT_EQ(stored.size(), deflated.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(stored[i].first, deflated[i].first);
    EXPECT_TRUE(at::equal(stored[i].second, deflated[i].second)) << stored[i].first;
  }
}

}  // namespace
}  // namespace detseg

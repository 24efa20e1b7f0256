// Implements: tests of the safetensors reader/writer: a file laid out by hand from the format
// description, a round trip of every dtype, and truncated or malformed files.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "detseg/core/error.h"
#include "detseg/core/files.h"
#include "detseg/io/safetensors.h"

namespace detseg {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()))).string();
}

TEST(Safetensors, ReadsAFileLaidOutByHand) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  file += header;
  const float a[2] = {1.5f, -2.f};
  const int64_t b = -7;
  file.append(reinterpret_cast<const char*>(a), 8);
  file.append(reinterpret_cast<const char*>(&b), 8);
  const std::string path = temp_path("detseg_st_hand");
  write_file_atomic(path, file);
  std::map<std::string, std::string> meta;
  const NamedTensors t = read_safetensors(path, &meta);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].first, "b");  // header order
  EXPECT_EQ(t[0].second.dim(), 0);
  EXPECT_EQ(t[0].second.item<int64_t>(), -7);
  EXPECT_TRUE(at::equal(t[1].second, at::tensor({1.5f, -2.f})));
  EXPECT_EQ(meta.at("format"), "pt");
  // Cut inside the data: the tensor that no longer fits is named.
  write_file_atomic(path, file.substr(0, file.size() - 3));
  try {
    read_safetensors(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b' lies outside the data"), std::string::npos);
  }
  std::remove(path.c_str());
}

TEST(Safetensors, RoundTripAndErrors) {
  const NamedTensors in = {
      {"w", at::arange(6, at::kFloat).reshape({2, 3}).t()},  // non-contiguous on the way in
      {"d", at::tensor({1.25, -3.5}, at::kDouble)},
      {"h", at::tensor({0.5f, 2.f}).to(at::kHalf)},
      {"bf", at::tensor({0.5f, 2.f}).to(at::kBFloat16)},
      {"i", at::tensor({1, -2}, at::kInt)},
      {"l", at::tensor({int64_t(1) << 40})},
      {"u", at::tensor({0, 255}, at::kByte)},
      {"flag", at::tensor({1, 0}, at::kByte).to(at::kBool)},
      {"empty", at::zeros({0, 3})},
  };
  const std::string path = temp_path("detseg_st_rt");
  write_safetensors(path, in, {{"source", "detseg"}});
  std::map<std::string, std::string> meta;
  const NamedTensors out = read_safetensors(path, &meta);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].second.scalar_type(), in[i].second.scalar_type());
    EXPECT_TRUE(at::equal(out[i].second, in[i].second)) << in[i].first;
  }
  EXPECT_EQ(meta.at("source"), "detseg");
  const std::string bytes = read_file(path);
  EXPECT_EQ((8 + uint8_t(bytes[0]) + (uint8_t(bytes[1]) << 8)) % 8,
            0);  // data starts 8-byte aligned
  for (size_t len : {size_t(0), size_t(7), size_t(20)}) {
    write_file_atomic(path, bytes.substr(0, len));
    EXPECT_THROW(read_safetensors(path), Error) << len;
  }
  write_file_atomic(path, std::string("\x05\0\0\0\0\0\0\0{nope", 13));
  EXPECT_THROW(read_safetensors(path), Error);
  EXPECT_THROW(write_safetensors(path, {{"x", at::ones({1})}, {"x", at::ones({1})}}), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace detseg

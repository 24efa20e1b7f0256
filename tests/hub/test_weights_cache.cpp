// The weights cache's rules without a network: where it lives, URL file names, the hash
// torchvision embeds in them, and which hash a source must match (with its one-line errors).
#include <gtest/gtest.h>

#include <cstdlib>

#include "detseg/core/error.h"
#include "detseg/hub/weights_cache.h"

namespace {

std::string config_error_of(const std::string& source, const std::string& sha256) {
  try {
    detseg::expected_sha256(source, sha256, "model.pretrained", "model.pretrained_sha256");
  } catch (const detseg::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

// Sets an environment variable for one scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST(WeightsCache, Location) {
  ScopedEnv home("HOME", "/home/u");
  {
    ScopedEnv detseg_home("DETSEG_HOME", "/data/detseg");
    EXPECT_EQ(detseg::weights_cache_dir(), "/data/detseg/weights");
  }
  ScopedEnv no_detseg_home("DETSEG_HOME", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(detseg::weights_cache_dir(), "/xdg/detseg/weights");
  }
  ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(detseg::weights_cache_dir(), "/home/u/.cache/detseg/weights");
}

TEST(WeightsCache, UrlsAndFileNames) {
  EXPECT_TRUE(detseg::is_url("https://download.pytorch.org/models/resnet50-0676ba61.pth"));
  EXPECT_TRUE(detseg::is_url("file:///tmp/w.pth"));
  EXPECT_FALSE(detseg::is_url("/tmp/w.pth"));
  EXPECT_FALSE(detseg::is_url("weights/w.pth"));
  EXPECT_FALSE(detseg::is_url("dir/x://y"));
  EXPECT_EQ(detseg::url_file_name("https://h/models/resnet50-0676ba61.pth?x=1#f", "k"), "resnet50-0676ba61.pth");
  EXPECT_THROW(detseg::url_file_name("https://host/", "k"), detseg::ConfigError);
  EXPECT_THROW(detseg::url_file_name("https://host", "k"), detseg::ConfigError);
}

TEST(WeightsCache, HashInTorchvisionFileNames) {
  EXPECT_EQ(detseg::hash_in_file_name("resnet50-0676ba61.pth"), "0676ba61");
  EXPECT_EQ(detseg::hash_in_file_name("mobilenet_v2-b0353104.pth"), "b0353104");
  EXPECT_EQ(detseg::hash_in_file_name("efficientnet_b0_rwightman-7f5810bc.pth"), "7f5810bc");
  EXPECT_EQ(detseg::hash_in_file_name("wide-resnet-0676ba61.pth"), "0676ba61");  // the first -<hex>. wins
  EXPECT_EQ(detseg::hash_in_file_name("resnet50.pth"), "");
  EXPECT_EQ(detseg::hash_in_file_name("resnet50-0676.pth"), "");      // too short to trust
  EXPECT_EQ(detseg::hash_in_file_name("resnet50-0676BA61.pth"), "");  // torch.hub reads lowercase only
}

TEST(WeightsCache, ExpectedHash) {
  const std::string url = "https://download.pytorch.org/models/resnet50-0676ba61.pth";
  EXPECT_EQ(detseg::expected_sha256(url, "", "k", "k2"), "0676ba61");
  EXPECT_EQ(detseg::expected_sha256(url, "ABCDEF0123", "k", "k2"), "abcdef0123");  // the pin wins
  EXPECT_EQ(detseg::expected_sha256("/w/resnet50-0676ba61.pth", "", "k", "k2"), "");  // a path: as given
  EXPECT_EQ(config_error_of("https://h/weights.pth", ""),
            "model.pretrained_sha256: required for https://h/weights.pth (its file name carries no -<hash>. as "
            "torchvision's do): the file's SHA-256, or its first 8+ hex digits");
  EXPECT_EQ(config_error_of(url, "0676ba6"),
            "model.pretrained_sha256: expected 8 to 64 hex digits (a SHA-256 or its start), got '0676ba6'");
  EXPECT_EQ(config_error_of("ftp://h/resnet50-0676ba61.pth", ""),
            "model.pretrained: ftp://h/resnet50-0676ba61.pth: unsupported URL scheme 'ftp' (http, https or file)");
}

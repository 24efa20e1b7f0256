// SHA-256 against FIPS 180-4's examples and Python's hashlib (the padding edges 55/56/63/64/65
// and 119/120 bytes, where the length does or does not fit the last block), fed whole and in
// uneven pieces; file hashing; the prefix rules the weights cache uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "detseg/core/error.h"
#include "detseg/hub/sha256.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using detseg::sha256_hex;

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 251);
  return s;
}

TEST(Sha256, PaddingEdgesMatchHashlib) {
  const std::pair<size_t, const char*> cases[] = {
      {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
      {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
      {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
      {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
      {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
      {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
      {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"}};
  for (const auto& [n, hex] : cases) {
    SCOPED_TRACE(n);
    EXPECT_EQ(sha256_hex(pattern(n)), hex);
  }
}

TEST(Sha256, PiecewiseUpdatesEqualOneShot) {
  const std::string data = pattern(10000);
  const std::string whole = sha256_hex(data);
  for (size_t piece : {1, 3, 63, 64, 65, 1000}) {
    SCOPED_TRACE(piece);
    detseg::Sha256 h;
    for (size_t at = 0; at < data.size(); at += piece) h.update(data.substr(at, piece));
    EXPECT_EQ(h.hex_digest(), whole);
  }
}

TEST(Sha256, FileHashAndMissingFile) {
  const detseg::testing::TempDir p_temp("test_sha256");
  const fs::path p = p_temp / "test.bin";
  const std::string data = pattern(3 << 20);  // spans several 1 MiB reads
  std::ofstream(p, std::ios::binary) << data;
  EXPECT_EQ(detseg::sha256_file(p.string()), sha256_hex(data));
  fs::remove(p);
  try {
    detseg::sha256_file(p.string());
    FAIL() << "no error";
  } catch (const detseg::Error& e) {
    EXPECT_EQ(std::string(e.what()), p.string() + ": cannot open for reading: No such file or directory");
  }
}

TEST(Sha256, PrefixRules) {
  EXPECT_TRUE(detseg::is_sha256_prefix("0676ba61"));
  EXPECT_TRUE(detseg::is_sha256_prefix("0676BA61"));
  EXPECT_TRUE(detseg::is_sha256_prefix(std::string(64, 'f')));
  EXPECT_FALSE(detseg::is_sha256_prefix("0676ba6"));           // under 8 digits
  EXPECT_FALSE(detseg::is_sha256_prefix(std::string(65, 'f')));  // longer than a SHA-256
  EXPECT_FALSE(detseg::is_sha256_prefix("0676ba6g"));
  const std::string digest = sha256_hex("abc");
  EXPECT_TRUE(detseg::sha256_matches(digest, "ba7816bf"));
  EXPECT_TRUE(detseg::sha256_matches(digest, "BA7816BF8F01"));
  EXPECT_TRUE(detseg::sha256_matches(digest, digest));
  EXPECT_FALSE(detseg::sha256_matches(digest, "ba7816be"));
  EXPECT_FALSE(detseg::sha256_matches(digest, ""));
}

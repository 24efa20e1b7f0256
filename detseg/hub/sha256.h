// Implements: SHA-256 (FIPS 180-4), for verifying downloaded weights against their pinned hash.
// Our own ~100 lines rather than OpenSSL: the torch-free base links no crypto library, and a
// hash that only checks integrity needs no constant-time tricks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace detseg {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& data) { update(data.data(), data.size()); }
  // The digest as 64 lowercase hex digits. Ends the hash: call once.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The hex SHA-256 of a whole string / file (read in 1 MiB chunks). Throws Error naming the file.
std::string sha256_hex(const std::string& data);
std::string sha256_file(const std::string& path);

// True when `hex` is 8 to 64 hex digits (either case): a full SHA-256 or a prefix of one, as
// torch.hub's check_hash accepts the 8 digits in torchvision's file names.
bool is_sha256_prefix(const std::string& hex);
// True when the lowercase `digest` starts with `expected` (compared case-insensitively).
bool sha256_matches(const std::string& digest, const std::string& expected);

}  // namespace detseg

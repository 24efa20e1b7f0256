// Implements: CRC32C (Castagnoli), used by the TFRecord framing of event files and by our
// checkpoint format to detect corrupt files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace detseg {

// Continues a running CRC: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }
inline uint32_t crc32c(std::string_view data) { return crc32c(data.data(), data.size()); }

// TFRecord's masked CRC (rotate right by 15, add a constant), so a CRC of data that itself holds
// CRCs stays well distributed.
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace detseg

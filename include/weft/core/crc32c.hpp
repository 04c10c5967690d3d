/// @file
/// CRC-32C (Castagnoli, the polynomial 0x1EDC6F41 reflected as 0x82F63B78), as in iSCSI,
/// ext4 and TensorFlow's checkpoints; table-driven. crc32c("123456789") = 0xE3069283.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace weft {

namespace detail {
inline constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}();
}  // namespace detail

/// The CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of the bytes before).
inline std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = detail::crc32c_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace weft

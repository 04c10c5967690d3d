/// @file
/// PNG encoding of 8-bit images (what TensorBoard's image summaries hold): `encode_png(pixels,
/// height, width, channels)` with 1 (grey), 2 (grey and alpha), 3 (RGB) or 4 (RGBA) channels,
/// rows top to bottom, each pixel's channels together (an [h, w, c] uint8 tensor's layout).
/// The scanlines are deflated by zlib where weft was built with it (WEFT_WITH_ZLIB, as the
/// CMake target weft::weft defines; zlib's default level, as TensorFlow's encoder uses), and
/// otherwise written in stored (uncompressed) deflate blocks, which every PNG reader reads.
/// Chunks carry PNG's CRC-32 and the zlib stream its Adler-32.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>

#ifdef WEFT_WITH_ZLIB
#include <zlib.h>
#endif

namespace weft {

namespace png_detail {
/// CRC-32 (ISO 3309, reflected polynomial 0xEDB88320), as PNG's chunks use.
inline std::uint32_t crc32(std::uint32_t crc, const void* p, std::size_t n) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* b = static_cast<const unsigned char*>(p);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}

inline void chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.append(type, 4);
  out.append(data);
  put_u32(out, crc32(0, out.data() + start, out.size() - start));
}

/// A zlib stream (RFC 1950) of `raw` in stored deflate blocks (RFC 1951 section 3.2.4).
inline std::string zlib_stored(const std::string& raw) {
  std::string z;
  z.push_back(static_cast<char>(0x78));  // deflate, 32 KiB window
  z.push_back(static_cast<char>(0x01));  // no dictionary, fastest; (0x78 << 8 | 0x01) % 31 == 0
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(raw.size() - at, 65535);
    const bool last = at + n == raw.size();
    z.push_back(static_cast<char>(last ? 1 : 0));  // BFINAL, BTYPE 00
    z.push_back(static_cast<char>(n & 0xff));
    z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff));
    z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z.append(raw, at, n);
    at += n;
  } while (at < raw.size());
  std::uint32_t a = 1, b = 0;  // Adler-32
  for (unsigned char ch : raw) a = (a + ch) % 65521, b = (b + a) % 65521;
  put_u32(z, b << 16 | a);
  return z;
}
}  // namespace png_detail

/// How a PNG's image data is compressed: deflated (where weft has zlib), or stored.
enum class png_compression { zlib, stored };

/// The PNG file of an 8-bit image. `compression` zlib deflates where weft has zlib and stores
/// otherwise; stored always stores.
std::string encode_png(const std::uint8_t* pixels, std::int64_t height, std::int64_t width, int channels,
                       png_compression compression = png_compression::zlib);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string encode_png(const std::uint8_t* pixels, std::int64_t height, std::int64_t width, int channels,
                                                  png_compression compression) {
  if (channels < 1 || channels > 4)
    fail(error_code::invalid_argument, "weft::encode_png: ", channels, " channels (1, 2, 3 or 4)");
  if (height < 1 || width < 1 || height > 0x7fffffff || width > 0x7fffffff)
    fail(error_code::invalid_argument, "weft::encode_png: a ", height, " x ", width,
         " image (each side 1 to 2^31 - 1 pixels)");
  const auto row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  if (row > (std::size_t{1} << 40) / static_cast<std::size_t>(height))
    fail(error_code::invalid_argument, "weft::encode_png: a ", height, " x ", width, " x ", channels,
         " image is larger than 1 TiB");
  std::string raw;  // each scanline after its filter byte (0: none)
  raw.reserve((row + 1) * static_cast<std::size_t>(height));
  for (std::int64_t y = 0; y < height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(pixels) + static_cast<std::size_t>(y) * row, row);
  }
  std::string z;
#ifdef WEFT_WITH_ZLIB
  if (compression == png_compression::zlib) {
    uLongf n = compressBound(static_cast<uLong>(raw.size()));
    z.resize(n);
    if (compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
                  static_cast<uLong>(raw.size()), Z_DEFAULT_COMPRESSION) != Z_OK)
      fail(error_code::internal, "weft::encode_png: zlib's compress2 failed");
    z.resize(n);
  }
#endif
  if (z.empty()) z = png_detail::zlib_stored(raw);
  static constexpr std::uint8_t colour_type[] = {0, 0, 4, 2, 6};  // grey, grey+alpha, RGB, RGBA
  std::string ihdr;
  png_detail::put_u32(ihdr, static_cast<std::uint32_t>(width));
  png_detail::put_u32(ihdr, static_cast<std::uint32_t>(height));
  ihdr += {'\x08', static_cast<char>(colour_type[channels]), '\0', '\0', '\0'};  // depth 8, deflate, filter 0, no interlace
  std::string out("\x89PNG\r\n\x1a\n", 8);
  png_detail::chunk(out, "IHDR", ihdr);
  png_detail::chunk(out, "IDAT", z);
  png_detail::chunk(out, "IEND", {});
  return out;
}
#endif

}  // namespace weft

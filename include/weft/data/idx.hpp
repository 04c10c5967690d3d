/// @file
/// The IDX format of MNIST and Fashion-MNIST: a big-endian header (two zero bytes, a type
/// code, the rank), the dims as big-endian uint32, then the values, big-endian.
///   0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64
/// read_idx checks the magic, the type code, and that the file holds exactly the values its
/// dims promise; any other file is an error naming it and what is wrong. A file whose name
/// ends in ".gz" is gunzipped first (zlib; Debian's Fashion-MNIST and the original MNIST
/// files are gzipped).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/runtime/records.hpp>

namespace weft::data {

namespace detail {
inline std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}
}  // namespace detail

/// The tensor stored in the IDX file held in `file`; `name` names it in errors, which
/// `hint` (how to get the file) ends.
tensor parse_idx(std::string_view file, const std::string& name, const std::string& hint = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE tensor parse_idx(std::string_view file, const std::string& name, const std::string& hint) {
  const std::basic_string_view<unsigned char> bytes(reinterpret_cast<const unsigned char*>(file.data()), file.size());
  auto bad = [&](auto&&... what) {
    fail(error_code::data_loss, "the IDX file ", name, " is not valid: ", what..., hint.empty() ? "" : "; ", hint);
  };
  if (bytes.size() < 4) bad("it has ", bytes.size(), " bytes, fewer than a header");
  if (bytes[0] != 0 || bytes[1] != 0) bad("its magic number does not start with two zero bytes");
  dtype type{};
  switch (bytes[2]) {
    case 0x08: type = dtype::uint8; break;
    case 0x09: type = dtype::int8; break;
    case 0x0B: type = dtype::int16; break;
    case 0x0C: type = dtype::int32; break;
    case 0x0D: type = dtype::float32; break;
    case 0x0E: type = dtype::float64; break;
    default: bad("unknown type code ", int{bytes[2]}, " (byte 3)");
  }
  const int rank = bytes[3];
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (bytes.size() < header) bad("it has ", bytes.size(), " bytes, fewer than the ", header, " of a rank-", rank, " header");
  std::vector<std::int64_t> dims;
  for (int d = 0; d < rank; ++d) dims.push_back(detail::big_endian_u32(bytes.data() + 4 + 4 * d));  // within: offsets into the header
  const std::size_t size = size_of(type), held = bytes.size() - header;
  std::uint64_t count = 1, need = 0;
  bool overflows = false;
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) count = 0;  // a product that overflows before a 0 is 0
  for (auto d : dims) overflows |= count && __builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count);
  if (overflows || __builtin_mul_overflow(count, size, &need))
    bad("its dims promise more bytes than 2^64, and it holds ", held, " bytes after the header");
  if (need != held)
    bad("its dims promise ", count, " values (", need, " bytes) but it holds ", held, " bytes after the header");
  tensor t(type, shape(dims));
  auto* out = static_cast<unsigned char*>(t.raw_data());
  const unsigned char* src = bytes.data() + header;
  if (size == 1 || std::endian::native == std::endian::big) {
    std::memcpy(out, src, count * size);
  } else {
    for (std::uint64_t i = 0; i < count; ++i)
      std::reverse_copy(src + i * size, src + (i + 1) * size, out + i * size);
  }
  return t;
}
#endif

/// The tensor stored in the IDX file at `path`; `hint` (how to get the file) ends the
/// message of a missing-file error.
inline tensor read_idx(const std::filesystem::path& path, const std::string& hint = {}) {
  std::string bytes = read_file(path, "the IDX file", hint);
  if (path.extension() == ".gz") bytes = decompress(bytes, compression::gzip, path.string());
  return parse_idx(bytes, path.string(), hint);
}

/// Where weft keeps data sets: $WEFT_DATA_DIR, else $XDG_CACHE_HOME/weft, else ~/.cache/weft
/// (tools/fetch-mnist puts MNIST in `<that>/mnist`).
inline std::filesystem::path data_dir() {
  if (const char* d = std::getenv("WEFT_DATA_DIR"); d && *d) return d;
  if (const char* c = std::getenv("XDG_CACHE_HOME"); c && *c) return std::filesystem::path(c) / "weft";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : ".") / ".cache" / "weft";
}

/// An image classification set: images [n, rows, cols] uint8 and labels [n] uint8.
struct image_set {
  tensor images;  ///< [n, rows, cols] uint8
  tensor labels;  ///< [n] uint8
  /// The number of images.
  std::int64_t size() const { return labels.num_elements(); }
};
/// A data set's training and test images (load_mnist).
struct mnist_data {
  image_set train;  ///< the training images
  image_set test;   ///< the test images
};

/// MNIST or Fashion-MNIST from the four IDX files in `dir` (named as MNIST's, each gzipped
/// or not: "<name>.gz" when "<name>" is absent), checked for shapes, matching counts and
/// labels in [0, 10).
mnist_data load_mnist(const std::filesystem::path& dir = data_dir() / "mnist",
                      const std::string& hint = "run tools/fetch-mnist to fetch MNIST into " +
                                                (data_dir() / "mnist").string());
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE mnist_data load_mnist(const std::filesystem::path& dir, const std::string& hint) {
  auto file = [&](const char* name) {
    const std::filesystem::path plain = dir / name, gz = dir / (std::string(name) + ".gz");
    return !std::filesystem::exists(plain) && std::filesystem::exists(gz) ? gz : plain;
  };
  auto load = [&](const char* images, const char* labels) {
    image_set s{read_idx(file(images), hint), read_idx(file(labels), hint)};
    const auto& is = s.images.shape();
    if (s.images.dtype() != dtype::uint8 || is.rank() != 3)
      fail(error_code::data_loss, (dir / images).string(), " holds ", s.images.dtype(), is, ", not uint8 images [n, rows, cols]");
    if (s.labels.dtype() != dtype::uint8 || s.labels.rank() != 1 || s.labels.shape()[0] != is[0])
      fail(error_code::data_loss, (dir / labels).string(), " holds ", s.labels.dtype(), s.labels.shape(), ", not ", is[0],
           " uint8 labels for the images of ", (dir / images).string());
    for (auto l : s.labels.flat<std::uint8_t>())
      if (l >= 10) fail(error_code::data_loss, (dir / labels).string(), " holds the label ", int{l}, ", outside [0, 10)");
    return s;
  };
  return {load("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), load("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")};
}
#endif

/// Where Debian's dataset-fashion-mnist package puts Fashion-MNIST (gzipped IDX files).
inline std::filesystem::path fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

}  // namespace weft::data

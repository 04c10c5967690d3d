/// @file
/// The checkpoint file: tensors by name in one file, written atomically, read back only
/// when the whole file checks out (runtime/checkpoint.hpp's saver, and the Save and Restore
/// ops of kernels/cpu/io.hpp, write and read it).
///
/// File format (version 1; integers little-endian):
///   "WEFTCKPT", u32 version, u32 count
///   count entries: u32 name length, name, u8 dtype, u8 rank, i64 dims[rank], u64 offset,
///                  u64 bytes, u32 CRC-32C of the tensor's bytes
///   u32 CRC-32C of everything above
///   the tensors' bytes, at their offsets, back to back to the end of the file; a string
///   tensor's bytes are its elements in order, each a u64 length and that many bytes
///
/// write_checkpoint writes to a temporary file in the same directory, fsyncs it, renames it
/// over the target and fsyncs the directory: a crash at any point leaves either the old file
/// or the new one, never a mix. read_checkpoint checks the magic, the version, the index's
/// checksum, that the file ends where the index says, and every tensor's checksum.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <weft/core/crc32c.hpp>
#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>

namespace weft {

namespace detail {
static_assert(std::endian::native == std::endian::little, "weft's checkpoint format is written little-endian");

/// "[2,3]": dims as read from a file, which may not make a valid shape.
inline std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';  // appended apart: g++ 12 -O3 warned (-Wrestrict) on "," + std::to_string(...)
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

inline constexpr char checkpoint_magic[8] = {'W', 'E', 'F', 'T', 'C', 'K', 'P', 'T'};

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

/// A string tensor's bytes in the file: each element's u64 length and bytes.
inline std::string string_tensor_bytes(const tensor& t) {
  std::string out;
  for (const std::string& e : t.flat<std::string>()) {
    put<std::uint64_t>(out, e.size());
    out += e;
  }
  return out;
}

/// The elements of a string tensor of `n` elements from its bytes in the file, or an error
/// message (which the reader reports with the tensor's name).
inline std::string parse_string_elements(std::string_view bytes, tensor& t) {
  std::size_t pos = 0;
  for (std::string& e : t.flat<std::string>()) {
    std::uint64_t len = 0;
    if (bytes.size() - pos < sizeof len) return "its bytes end inside an element's length";
    std::memcpy(&len, bytes.data() + pos, sizeof len);
    pos += sizeof len;
    if (len > bytes.size() - pos)
      return "an element of " + std::to_string(len) + " bytes runs past its " + std::to_string(bytes.size()) + " bytes";
    e.assign(bytes.data() + pos, len);
    pos += len;
  }
  if (pos != bytes.size()) return std::to_string(bytes.size() - pos) + " bytes follow its last element";
  return {};
}
}  // namespace detail

/// A checkpoint's bytes in parts, as written (the format above): the header and index, then
/// the tensors' bytes, which `blobs` views in place (a string tensor's in `strings`). Offsets
/// count from the start of `index`. Names must be distinct and non-empty.
struct checkpoint_parts {
  std::string index;                    ///< the header and index
  std::vector<std::string_view> blobs;  ///< each tensor's bytes, in the index's order
  std::vector<std::string> strings;  ///< the string tensors' bytes, which blobs view

  /// The parts of a checkpoint of `tensors` (name, value), which must outlive it.
  explicit checkpoint_parts(const std::vector<std::pair<std::string, tensor>>& tensors);
  checkpoint_parts(const checkpoint_parts&) = delete;  ///< blobs view strings' own buffers
  checkpoint_parts& operator=(const checkpoint_parts&) = delete;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE checkpoint_parts::checkpoint_parts(const std::vector<std::pair<std::string, tensor>>& tensors) {
  index.append(detail::checkpoint_magic, 8);
  detail::put<std::uint32_t>(index, 1);
  detail::put<std::uint32_t>(index, static_cast<std::uint32_t>(tensors.size()));
  std::size_t index_size = index.size() + 4;
  for (const auto& [name, t] : tensors) index_size += 4 + name.size() + 2 + 8 * static_cast<std::size_t>(t.rank()) + 8 + 8 + 4;
  std::uint64_t offset = index_size;
  strings.reserve(tensors.size());  // blobs view these: no reallocation
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || std::find(names.begin(), names.end(), name) != names.end())
      fail(error_code::invalid_argument, "write_checkpoint: tensor names must be distinct and non-empty, got '", name, "' twice or empty");
    names.push_back(name);
    detail::put<std::uint32_t>(index, static_cast<std::uint32_t>(name.size()));
    index += name;
    detail::put<std::uint8_t>(index, static_cast<std::uint8_t>(t.dtype()));
    detail::put<std::uint8_t>(index, static_cast<std::uint8_t>(t.rank()));
    for (int d = 0; d < t.rank(); ++d) detail::put<std::int64_t>(index, t.shape()[d]);
    const std::string_view blob = t.dtype() == dtype::string
                                      ? std::string_view(strings.emplace_back(detail::string_tensor_bytes(t)))
                                      : std::string_view(static_cast<const char*>(t.raw_data()), t.bytes());
    detail::put<std::uint64_t>(index, offset);
    detail::put<std::uint64_t>(index, blob.size());
    detail::put<std::uint32_t>(index, crc32c(blob.data(), blob.size()));
    offset += blob.size();
    blobs.push_back(blob);
  }
  detail::put<std::uint32_t>(index, crc32c(index.data(), index.size()));
}
#endif

/// Writes `tensors` (name, value) to `path` atomically (see the format above). Names must be
/// distinct and non-empty.
inline void write_checkpoint(const std::filesystem::path& path, const std::vector<std::pair<std::string, tensor>>& tensors) {
  const checkpoint_parts parts(tensors);
  detail::write_file_atomically(path, parts.index, parts.blobs, "the checkpoint");
}

/// Every tensor of the checkpoint file held in `bytes`, in file order, after checking the
/// whole of it; `name` names the file in errors.
std::vector<std::pair<std::string, tensor>> parse_checkpoint(std::string_view bytes, const std::string& name);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<std::pair<std::string, tensor>> parse_checkpoint(std::string_view bytes, const std::string& name) {
  auto bad = [&](auto&&... what) { fail(error_code::data_loss, "the checkpoint ", name, " is corrupt: ", what...); };
  std::size_t pos = 0;
  auto take = [&](std::size_t n, const char* what) {
    if (bytes.size() - pos < n) bad("it ends inside ", what, " (", bytes.size(), " bytes)");
    const char* p = bytes.data() + pos;
    pos += n;
    return p;
  };
  auto get = [&]<class T>(T, const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  };
  if (std::memcmp(take(8, "the magic number"), detail::checkpoint_magic, 8) != 0) bad("it is not a weft checkpoint (bad magic number)");
  if (auto v = get(std::uint32_t{}, "the header"); v != 1) bad("unknown format version ", v);
  const auto count = get(std::uint32_t{}, "the header");
  struct entry {
    std::string name;
    dtype type;
    shape dims;
    std::uint64_t offset, size;
    std::uint32_t crc;
  };
  std::vector<entry> entries;
  std::unordered_set<std::string> names;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto len = get(std::uint32_t{}, "the index");
    entry e;
    e.name.assign(take(len, "the index"), len);
    if (!names.insert(e.name).second) bad("it holds two tensors named '", e.name, "'");
    const auto t = get(std::uint8_t{}, "the index");
    if (t == 0 || t >= dtype_count) bad("tensor '", e.name, "' has an unknown dtype code ", int{t});
    e.type = static_cast<dtype>(t);
    const auto rank = get(std::uint8_t{}, "the index");
    std::vector<std::int64_t> dims;
    std::uint64_t elements = 1;
    bool overflows = false;
    for (int d = 0; d < rank; ++d) {
      dims.push_back(get(std::int64_t{}, "the index"));
      if (dims.back() < 0) bad("tensor '", e.name, "' has a dimension of ", dims.back());
      overflows |= __builtin_mul_overflow(elements, static_cast<std::uint64_t>(dims.back()), &elements);
    }
    std::uint64_t size = 0;
    // Nothing larger than the file can be in it: this also keeps every product below in range
    // (a string element takes at least its 8-byte length).
    const std::uint64_t least = e.type == dtype::string ? sizeof(std::uint64_t) : size_of(e.type);
    if (overflows || __builtin_mul_overflow(elements, least, &size) || size > bytes.size())
      bad("tensor '", e.name, "' declares dims ", detail::dims_text(dims), " of ", e.type, ", more bytes than the file's ",
          bytes.size());
    e.dims = shape(dims);
    e.offset = get(std::uint64_t{}, "the index");
    e.size = get(std::uint64_t{}, "the index");
    e.crc = get(std::uint32_t{}, "the index");
    entries.push_back(std::move(e));
  }
  const std::uint32_t index_crc = crc32c(bytes.data(), pos);
  if (get(std::uint32_t{}, "the index checksum") != index_crc) bad("the index's checksum does not match");
  std::uint64_t expected_end = pos;
  std::vector<std::pair<std::string, tensor>> result;
  for (const auto& e : entries) {
    // Each entry's dims were checked to need at most the file's size, so the product fits.
    const bool strings = e.type == dtype::string;
    const auto least = static_cast<std::uint64_t>(e.dims.num_elements()) * (strings ? sizeof(std::uint64_t) : size_of(e.type));  // within: each entry's bytes were checked against the file
    if (e.offset != expected_end || (strings ? e.size < least : e.size != least))
      bad("tensor '", e.name, "' has an inconsistent offset or size");
    if (e.offset > bytes.size() || e.size > bytes.size() - e.offset)
      bad("it is truncated: tensor '", e.name, "' needs ", e.size, " bytes from offset ", e.offset, ", the file has ",
          bytes.size());
    if (crc32c(bytes.data() + e.offset, e.size) != e.crc) bad("tensor '", e.name, "' fails its checksum");
    tensor t(e.type, e.dims);
    if (strings) {
      if (std::string why = detail::parse_string_elements(bytes.substr(e.offset, e.size), t); !why.empty())
        bad("string tensor '", e.name, "' at offset ", e.offset, ": ", why);
    } else if (e.size) {
      std::memcpy(t.raw_data(), bytes.data() + e.offset, e.size);
      if (e.type == dtype::boolean)  // a byte other than 0 or 1 is no bool: any non-zero byte is true
        for (auto* b = static_cast<unsigned char*>(t.raw_data()), *end = b + e.size; b != end; ++b) *b = *b != 0;
    }
    result.emplace_back(e.name, std::move(t));
    expected_end = e.offset + e.size;
  }
  if (bytes.size() != expected_end) bad("it has ", bytes.size() - expected_end, " bytes after the last tensor");
  return result;
}
#endif

/// Every tensor of the checkpoint at `path`, in file order, after checking the whole file.
inline std::vector<std::pair<std::string, tensor>> read_checkpoint(const std::filesystem::path& path) {
  return parse_checkpoint(read_file(path, "the checkpoint"), path.string());
}

/// The path held by a string scalar (a file name input).
inline std::filesystem::path path_of(const tensor& name) {
  if (name.dtype() != dtype::string || name.rank() != 0)
    fail(error_code::invalid_argument, "filename must be a string scalar, got ", name.dtype(), name.shape());
  const std::string& s = *name.data<std::string>();
  if (s.empty() || s.find('\0') != std::string::npos)
    fail(error_code::invalid_argument, "filename must be a non-empty path without NUL bytes");
  return s;
}
/// A path as the string scalar Save and Restore take.
inline tensor filename_tensor(const std::filesystem::path& path) { return tensor::scalar(path.string()); }

}  // namespace weft

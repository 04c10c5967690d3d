/// @file
/// Record files, as the readers (runtime/reader.hpp) cut them:
/// - TFRecord, TensorFlow's framing, so that files written by TensorFlow are read and files
///   written here are read by TensorFlow: each record is
///     u64 length (little-endian), u32 masked CRC-32C of those 8 bytes,
///     the data, u32 masked CRC-32C of the data,
///   where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8;
/// - fixed-length records (MNIST's and CIFAR's binaries): header_bytes skipped, then records
///   of record_bytes, one every hop_bytes (record_bytes when 0), up to footer_bytes from the
///   end;
/// - text lines: each line without its "\n" (and a "\r" before it), the first
///   skip_header_lines skipped, a last line without "\n" kept;
/// - whole files: one record, the file.
/// A file may be compressed with gzip or zlib (compression_type "GZIP" or "ZLIB", as
/// TensorFlow names them; several gzip members one after the other are read as one stream),
/// which needs zlib: the CMake target weft::weft links it and defines WEFT_WITH_ZLIB when
/// Debian's zlib1g-dev is installed; without it a compressed file is an unimplemented error.
/// Errors name the file and the byte offset of the bad record; files are read whole.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef WEFT_WITH_ZLIB
#include <zlib.h>
#endif

#include <weft/core/crc32c.hpp>
#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/runtime/checkpoint_file.hpp>

namespace weft {

/// How a records file is compressed.
enum class compression { none, gzip, zlib };

/// "", "GZIP" or "ZLIB", as TensorFlow's compression_type attrs say it.
inline compression parse_compression(std::string_view s) {
  if (s.empty() || s == "NONE") return compression::none;
  if (s == "GZIP") return compression::gzip;
  if (s == "ZLIB") return compression::zlib;
  fail(error_code::invalid_argument, "unknown compression_type '", s, "' (\"\", \"GZIP\" or \"ZLIB\")");
}

/// Whether this build reads and writes compressed files (WEFT_WITH_ZLIB).
inline constexpr bool zlib_available() noexcept {
#ifdef WEFT_WITH_ZLIB
  return true;
#else
  return false;
#endif
}

namespace detail {
[[noreturn]] inline void no_zlib(const std::string& what) {
  fail(error_code::unimplemented, what, " is compressed, and this program was built without zlib (install zlib1g-dev and "
       "link weft::weft, which then defines WEFT_WITH_ZLIB)");
}
}  // namespace detail

/// The bytes that `bytes` (the contents of `what`, compressed with `c`) stand for.
std::string decompress(std::string_view bytes, compression c, const std::string& what);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string decompress(std::string_view bytes, compression c, const std::string& what) {
  if (c == compression::none) return std::string(bytes);
#ifdef WEFT_WITH_ZLIB
  std::string out;
  z_stream z{};
  const int window = c == compression::gzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (inflateInit2(&z, window) != Z_OK) fail(error_code::internal, "zlib: inflateInit2 failed for ", what);
  struct ender {
    z_stream* z;
    ~ender() { inflateEnd(z); }
  } end_on_exit{&z};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = 0;
  std::size_t left = bytes.size();
  char chunk[65536];
  for (;;) {
    if (z.avail_in == 0 && left > 0) {
      const auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
      z.avail_in = n;
      left -= n;
    }
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    const int r = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (r == Z_STREAM_END) {
      if (z.avail_in == 0 && left == 0) return out;
      if (c != compression::gzip) break;  // bytes after a zlib stream
      inflateReset(&z);                   // the next gzip member
      continue;
    }
    if (r == Z_BUF_ERROR && z.avail_in == 0 && left == 0) {
      fail(error_code::data_loss, what, " is truncated: its ", c == compression::gzip ? "gzip" : "zlib",
           " stream ends after ", bytes.size(), " bytes, before its end");
    }
    if (r != Z_OK && r != Z_BUF_ERROR)
      fail(error_code::data_loss, what, " is not valid ", c == compression::gzip ? "gzip" : "zlib", " data near byte ",
           z.total_in, z.msg ? std::string(": ") + z.msg : std::string());
  }
  fail(error_code::data_loss, what, " has bytes after its zlib stream (at byte ", z.total_in, ")");
#else
  detail::no_zlib(what);
#endif
}
#endif

/// `bytes` compressed with `c` (level 6, zlib's default).
std::string compress(std::string_view bytes, compression c);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string compress(std::string_view bytes, compression c) {
  if (c == compression::none) return std::string(bytes);
#ifdef WEFT_WITH_ZLIB
  z_stream z{};
  const int window = c == compression::gzip ? 16 + MAX_WBITS : MAX_WBITS;
  if (deflateInit2(&z, 6, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail(error_code::internal, "zlib: deflateInit2 failed");
  struct ender {
    z_stream* z;
    ~ender() { deflateEnd(z); }
  } end_on_exit{&z};
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  std::size_t left = bytes.size();
  char chunk[65536];
  for (;;) {
    if (z.avail_in == 0 && left > 0) {
      const auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
      z.avail_in = n;
      left -= n;
    }
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    const int r = deflate(&z, left == 0 ? Z_FINISH : Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - z.avail_out);
    if (r == Z_STREAM_END) return out;
    if (r != Z_OK && r != Z_BUF_ERROR) fail(error_code::internal, "zlib: deflate failed (", r, ")");
  }
#else
  detail::no_zlib("the output");
#endif
}
#endif

/// TFRecord's checksum of `size` bytes at `data`.
inline std::uint32_t masked_crc32c(const void* data, std::size_t size) noexcept {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/// Appends `record` to `out` in TFRecord's framing.
inline void append_tfrecord(std::string& out, std::string_view record) {
  const std::uint64_t length = record.size();
  char head[12];
  std::memcpy(head, &length, 8);
  const std::uint32_t length_crc = masked_crc32c(head, 8);
  std::memcpy(head + 8, &length_crc, 4);
  out.append(head, 12);
  out.append(record);
  const std::uint32_t data_crc = masked_crc32c(record.data(), record.size());
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
}

/// Writes `records` to `path` as a TFRecord file compressed with `c`, atomically (a
/// temporary file, fsync'd, renamed over the target).
inline void write_tfrecords(const std::filesystem::path& path, const std::vector<std::string>& records,
                            compression c = compression::none) {
  std::string bytes;
  for (const auto& r : records) append_tfrecord(bytes, r);
  detail::write_file_atomically(path, compress(bytes, c), {}, "the records file");
}

/// How a file is cut into records.
struct record_format {
  /// TFRecord framing, records of a fixed length, lines of text, or each file one record.
  enum class kind { tfrecord, fixed_length, text_line, whole_file };
  kind type = kind::tfrecord;  ///< the framing
  std::int64_t header_bytes = 0;       ///< fixed_length: bytes skipped at the start
  std::int64_t record_bytes = 0;       ///< fixed_length: each record's bytes
  std::int64_t footer_bytes = 0;       ///< fixed_length: bytes ignored at the end
  std::int64_t hop_bytes = 0;          ///< fixed_length: the step between records (0: record_bytes)
  std::int64_t skip_header_lines = 0;  ///< text_line: lines skipped at the start
  compression compressed = compression::none;  ///< how each file is compressed
};

/// The records of one file's (decompressed) bytes, one at a time. `name` names the file in
/// errors, with the byte offset (in the decompressed bytes) of the bad record.
class record_cursor {
 public:
  /// The records of `bytes` (decompressed) cut as f says; `name` names the file in errors.
  record_cursor(std::string name, std::string bytes, record_format f)
      : name_(std::move(name)), bytes_(std::move(bytes)), f_(f) {
    if (f_.type == record_format::kind::fixed_length) {
      if (f_.record_bytes <= 0) fail(error_code::invalid_argument, "record_bytes must be positive, got ", f_.record_bytes);
      if (f_.header_bytes < 0 || f_.footer_bytes < 0 || f_.hop_bytes < 0)
        fail(error_code::invalid_argument, "header_bytes, footer_bytes and hop_bytes must not be negative");
      const auto size = static_cast<std::int64_t>(bytes_.size());
      if (f_.header_bytes + f_.footer_bytes > size)
        fail(error_code::data_loss, name_, " has ", size, " bytes, fewer than its header (", f_.header_bytes,
             ") and footer (", f_.footer_bytes, ")");
      pos_ = static_cast<std::size_t>(f_.header_bytes);
      end_ = bytes_.size() - static_cast<std::size_t>(f_.footer_bytes);
    } else {
      end_ = bytes_.size();
    }
    if (f_.type == record_format::kind::text_line)
      for (std::int64_t i = 0; i < f_.skip_header_lines && pos_ < end_; ++i) (void)line();
  }

  /// The file's name.
  const std::string& name() const noexcept { return name_; }
  /// Records given so far.
  std::int64_t index() const noexcept { return index_; }

  /// The next record, or nullopt at the end of the file; a bad record is a data_loss error.
  std::optional<std::string> next() {
    switch (f_.type) {
      case record_format::kind::whole_file:
        if (index_ > 0) return std::nullopt;
        ++index_;
        return std::move(bytes_);
      case record_format::kind::text_line:
        if (pos_ >= end_) return std::nullopt;
        ++index_;
        return line();
      case record_format::kind::fixed_length: {
        if (pos_ >= end_) return std::nullopt;
        const auto want = static_cast<std::size_t>(f_.record_bytes);
        if (end_ - pos_ < want)
          fail(error_code::data_loss, name_, ": a record of ", want, " bytes at offset ", pos_, " runs past the data's end at ",
               end_, " (", end_ - pos_, " bytes left)");
        std::string r = bytes_.substr(pos_, want);
        const auto hop = static_cast<std::size_t>(f_.hop_bytes > 0 ? f_.hop_bytes : f_.record_bytes);
        pos_ = end_ - pos_ < hop ? end_ : pos_ + hop;
        ++index_;
        return r;
      }
      case record_format::kind::tfrecord: return tfrecord();
    }
    return std::nullopt;
  }

 private:
  std::string line() {
    std::size_t nl = bytes_.find('\n', pos_);
    if (nl == std::string::npos || nl > end_) nl = end_;
    std::size_t stop = nl;
    if (stop > pos_ && bytes_[stop - 1] == '\r') --stop;
    std::string r = bytes_.substr(pos_, stop - pos_);
    pos_ = nl + 1;
    return r;
  }
  std::optional<std::string> tfrecord() {
    if (pos_ == end_) return std::nullopt;
    const std::size_t at = pos_;
    if (end_ - pos_ < 12)
      fail(error_code::data_loss, name_, " is truncated: a record's header at offset ", at, " needs 12 bytes, ", end_ - pos_,
           " are left");
    std::uint64_t length = 0;
    std::uint32_t length_crc = 0;
    std::memcpy(&length, bytes_.data() + pos_, 8);
    std::memcpy(&length_crc, bytes_.data() + pos_ + 8, 4);
    if (masked_crc32c(bytes_.data() + pos_, 8) != length_crc)
      fail(error_code::data_loss, name_, " is corrupt: the length of the record at offset ", at, " fails its checksum");
    pos_ += 12;
    if (length > end_ - pos_ || end_ - pos_ - length < 4)
      fail(error_code::data_loss, name_, " is truncated: the record at offset ", at, " of ", length, " bytes needs ",
           length, " + 4 bytes, ", end_ - pos_, " are left");
    std::string r = bytes_.substr(pos_, static_cast<std::size_t>(length));
    pos_ += static_cast<std::size_t>(length);
    std::uint32_t data_crc = 0;
    std::memcpy(&data_crc, bytes_.data() + pos_, 4);
    pos_ += 4;
    if (masked_crc32c(r.data(), r.size()) != data_crc)
      fail(error_code::data_loss, name_, " is corrupt: the data of the record at offset ", at, " fails its checksum");
    ++index_;
    return r;
  }

  std::string name_;
  std::string bytes_;
  record_format f_;
  std::size_t pos_ = 0, end_ = 0;
  std::int64_t index_ = 0;
};

/// The records of the file at `path` (read whole, decompressed, cut by `f`).
inline record_cursor open_records(const std::filesystem::path& path, const record_format& f) {
  std::string bytes = read_file(path, "the input file");
  return record_cursor(path.string(), decompress(bytes, f.compressed, path.string()), f);
}

/// Every record of the file at `path`.
inline std::vector<std::string> read_records(const std::filesystem::path& path, const record_format& f) {
  record_cursor c = open_records(path, f);
  std::vector<std::string> out;
  while (auto r = c.next()) out.push_back(std::move(*r));
  return out;
}

}  // namespace weft

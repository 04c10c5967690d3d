/// @file
/// Protocol Buffers' wire format (https://protobuf.dev/programming-guides/encoding/), as
/// much of it as weft's files in TensorFlow's formats need (GraphDef, and the messages of
/// TensorBoard's event files): a writer that appends fields to a string, and a reader that
/// walks the fields of one message. No schema and no generated code: the message layouts are
/// written where they are used (graph/graph_def.hpp), with the field numbers of TensorFlow's
/// published .proto files.
///
/// The reader trusts nothing: a truncated varint, a varint longer than ten bytes, a length
/// that runs past the message, a field number 0, and the deprecated group wire types are
/// each a weft::error (data_loss) that names the message being read and the byte offset,
/// never a read out of bounds.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include <weft/core/error.hpp>

namespace weft::wire {

static_assert(std::endian::native == std::endian::little, "weft's wire codec copies fixed-width fields as they lie in memory");

/// Protobuf's wire types (the low three bits of a field's key).
enum class wire_type : std::uint8_t { varint = 0, fixed64 = 1, bytes = 2, start_group = 3, end_group = 4, fixed32 = 5 };

/// Appends fields of one message to a string. A nested message is written into a writer of
/// its own and added with `message()` (its length must be known first).
class writer {
 public:
  /// Appends v as a base-128 varint, with no tag.
  void raw_varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  /// Appends a field's key: its number and wire type.
  void tag(std::uint32_t field, wire_type t) { raw_varint((std::uint64_t{field} << 3) | static_cast<std::uint8_t>(t)); }

  /// int32, int64, uint32, uint64, bool and enums: a negative int is written as its 64-bit
  /// two's complement (ten bytes), as protobuf does for int32 and int64.
  void varint(std::uint32_t field, std::uint64_t v) {
    tag(field, wire_type::varint);
    raw_varint(v);
  }
  /// An int64 (or int32) field: negative values take ten bytes.
  void int64(std::uint32_t field, std::int64_t v) { varint(field, static_cast<std::uint64_t>(v)); }
  /// A bool field (varint 0 or 1).
  void boolean(std::uint32_t field, bool v) { varint(field, v ? 1 : 0); }
  /// A fixed32 field: four little-endian bytes.
  void fixed32(std::uint32_t field, std::uint32_t v) {
    tag(field, wire_type::fixed32);
    append(&v, 4);
  }
  /// A fixed64 field: eight little-endian bytes.
  void fixed64(std::uint32_t field, std::uint64_t v) {
    tag(field, wire_type::fixed64);
    append(&v, 8);
  }
  /// A float field (fixed32 bits).
  void float32(std::uint32_t field, float v) { fixed32(field, std::bit_cast<std::uint32_t>(v)); }
  /// A double field (fixed64 bits).
  void float64(std::uint32_t field, double v) { fixed64(field, std::bit_cast<std::uint64_t>(v)); }
  /// A length-delimited field: string, bytes, or an encoded message.
  void bytes(std::uint32_t field, std::string_view v) {
    tag(field, wire_type::bytes);
    raw_varint(v.size());
    out_.append(v);
  }
  /// A nested message field: m's bytes, length-delimited.
  void message(std::uint32_t field, const writer& m) { bytes(field, m.data()); }

  /// A packed repeated field: `n` values, each written by `each(writer&, i)` with the raw_
  /// and append calls (the payload's length is known only after).
  template <class Each>
  void packed(std::uint32_t field, std::size_t n, Each each) {
    if (n == 0) return;
    writer payload;
    for (std::size_t i = 0; i < n; ++i) each(payload, i);
    bytes(field, payload.data());
  }
  /// Appends n raw bytes (packed payloads).
  void append(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }

  /// The bytes written so far.
  const std::string& data() const noexcept { return out_; }
  /// Moves the bytes out (the writer is left empty).
  std::string take() noexcept { return std::move(out_); }
  /// How many bytes were written.
  std::size_t size() const noexcept { return out_.size(); }

 private:
  std::string out_;
};

/// One field as read: its number and wire type, and its value (`number` for varint and
/// fixed-width fields, `bytes` for length-delimited ones).
struct field {
  /// The field number.
  std::uint32_t number = 0;
  /// The wire type.
  wire_type type = wire_type::varint;
  /// A varint's or fixed-width field's bits.
  std::uint64_t number_value = 0;
  /// A length-delimited field's payload (a view of the reader's data).
  std::string_view bytes;

  /// The value as an int64 (two's complement).
  std::int64_t as_int64() const noexcept { return static_cast<std::int64_t>(number_value); }
  /// int32 fields hold a value sign-extended to 64 bits; anything else is cut to 32 bits as
  /// protobuf's parsers do.
  std::int32_t as_int32() const noexcept { return static_cast<std::int32_t>(static_cast<std::uint32_t>(number_value)); }
  /// The value as a bool (nonzero is true).
  bool as_bool() const noexcept { return number_value != 0; }
  /// A fixed32 field's bits as a float.
  float as_float() const noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(number_value)); }
  /// A fixed64 field's bits as a double.
  double as_double() const noexcept { return std::bit_cast<double>(number_value); }
};

/// Walks the fields of one message. `what` names the message in errors ("GraphDef node 3's
/// AttrValue 'value'").
class reader {
 public:
  /// A reader over data (which must outlive it); `what` names the message in errors.
  reader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

  /// Every byte was read.
  bool done() const noexcept { return pos_ >= data_.size(); }
  /// The next byte's offset.
  std::size_t offset() const noexcept { return pos_; }
  /// The message's name in errors.
  const std::string& what() const noexcept { return what_; }

  /// The next field, or false at the end of the message.
  bool next(field& f) {
    if (done()) return false;
    const std::size_t at = pos_;
    const std::uint64_t key = raw_varint();
    const std::uint64_t number = key >> 3;
    if (number == 0 || number > 0x1FFFFFFF) bad(at, "a field number of " + std::to_string(number));
    f.number = static_cast<std::uint32_t>(number);
    f.type = static_cast<wire_type>(key & 7);
    f.bytes = {};
    f.number_value = 0;
    switch (f.type) {
      case wire_type::varint: f.number_value = raw_varint(); break;
      case wire_type::fixed64: f.number_value = fixed<std::uint64_t>(); break;
      case wire_type::fixed32: f.number_value = fixed<std::uint32_t>(); break;
      case wire_type::bytes: {
        const std::uint64_t n = raw_varint();
        if (n > data_.size() - pos_)
          bad(at, "field " + std::to_string(f.number) + " claiming " + std::to_string(n) + " bytes where " +
                      std::to_string(data_.size() - pos_) + " remain");
        f.bytes = data_.substr(pos_, static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        break;
      }
      default:
        bad(at, "field " + std::to_string(f.number) + " of wire type " + std::to_string(key & 7) +
                    (f.type == wire_type::start_group || f.type == wire_type::end_group ? " (a group, which weft does not read)"
                                                                                      : " (no such wire type)"));
    }
    return true;
  }

  /// Checks that `f` has the wire type `t` that its field number has in the schema.
  void expect(const field& f, wire_type t, std::string_view field_name) const {
    if (f.type != t)
      fail(error_code::data_loss, what_, ": field ", f.number, " (", field_name, ") has wire type ",
           static_cast<int>(f.type), ", not ", static_cast<int>(t));
  }

  /// The values of a repeated scalar field, packed (one bytes field) or not (one field per
  /// value): calls `each(std::uint64_t)` with each value's bits. `t` is the field's element
  /// wire type: varint, fixed32 or fixed64.
  template <class Each>
  void repeated(const field& f, wire_type t, std::string_view field_name, Each each) const {
    if (f.type != wire_type::bytes) {
      expect(f, t, field_name);
      each(f.number_value);
      return;
    }
    reader packed(f.bytes, what_ + " " + std::string(field_name));
    while (!packed.done()) {
      switch (t) {
        case wire_type::varint: each(packed.raw_varint()); break;
        case wire_type::fixed32: each(packed.fixed<std::uint32_t>()); break;
        case wire_type::fixed64: each(packed.fixed<std::uint64_t>()); break;
        default: fail(error_code::internal, "wire::reader::repeated: element wire type ", static_cast<int>(t));
      }
    }
  }

  /// Reads a base-128 varint, or a data_loss error for one cut off or beyond 64 bits.
  std::uint64_t raw_varint() {
    const std::size_t at = pos_;
    std::uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) bad(at, "a varint cut off by the end of the message");
      const auto b = static_cast<std::uint8_t>(data_[pos_++]);
      if (shift == 63 && b > 1) bad(at, "a varint beyond 64 bits");
      v |= std::uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
    bad(at, "a varint longer than ten bytes");
  }

  /// Reads a little-endian fixed-width T, or a data_loss error when cut off.
  template <class T>
  T fixed() {
    if (data_.size() - pos_ < sizeof(T)) bad(pos_, "a " + std::to_string(8 * sizeof(T)) + "-bit value cut off by the end of the message");
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

 private:
  [[noreturn]] void bad(std::size_t at, const std::string& found) const {
    fail(error_code::data_loss, what_, ": malformed at byte ", at, " of ", data_.size(), ": ", found);
  }

  std::string_view data_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace weft::wire

/// @file
/// CPU kernels for ops/parsing_ops.hpp: DecodeRaw and DecodeCSV.
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/parsing_ops.hpp>

namespace weft::cpu {

/// The CPU kernel of DecodeRaw.
struct decode_raw_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit decode_raw_kernel(const node& n) : type_(n.attr<dtype>("out_type")), little_(n.attr<bool>("little_endian")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& in = ctx.input(0);
    const auto* s = in.data<std::string>();
    const std::int64_t count = in.num_elements();
    const std::size_t width = size_of(type_);
    std::size_t length = count ? s[0].size() : 0;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string& b = s[i];
      if (b.size() % width != 0)
        fail(error_code::invalid_argument, "bytes[", i, "] has ", b.size(), " bytes, not a multiple of ", type_, "'s ",
             width);
      if (b.size() != length)
        fail(error_code::invalid_argument, "bytes[", i, "] has ", b.size(), " bytes and bytes[0] ", length,
             ": every string must have the same length");
    }
    auto dims = in.shape().dims();
    dims.push_back(static_cast<std::int64_t>(length / width));
    tensor& out = ctx.allocate_output(0, shape(dims));
    auto* o = static_cast<char*>(out.raw_data());
    const bool swap = little_ != (std::endian::native == std::endian::little) && width > 1;
    for (std::int64_t i = 0; i < count; ++i) {
      char* to = o + static_cast<std::size_t>(i) * length;  // within: the output holds count strings of `length` bytes
      if (length) std::memcpy(to, s[i].data(), length);
      if (swap) {
        const std::size_t parts = is_complex(type_) ? 2 : 1, part = width / parts;  // a complex number swaps each half
        for (std::size_t at = 0; at < length; at += part) std::reverse(to + at, to + at + part);
      }
    }
    if (type_ == dtype::boolean)  // any nonzero byte is true, as a bool must be 0 or 1
      for (auto& b : out.flat<bool>()) b = reinterpret_cast<const unsigned char&>(b) != 0;
  }
 private:
  dtype type_;
  bool little_;
};

/// One CSV record's fields (quoted fields unquoted), or an error message.
inline std::string split_csv(std::string_view record, char delim, bool quotes, std::vector<std::string>& fields) {
  fields.clear();
  std::size_t i = 0;
  for (;;) {
    std::string field;
    if (quotes && i < record.size() && record[i] == '"') {
      ++i;
      for (;;) {
        if (i >= record.size()) return "a quoted field is not closed";
        if (record[i] == '"') {
          if (i + 1 < record.size() && record[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += record[i++];
      }
      if (i < record.size() && record[i] != delim)
        return "a quoted field is followed by '" + std::string(1, record[i]) + "', not the delimiter";
    } else {
      const std::size_t end = std::min(record.find(delim, i), record.size());
      field.assign(record.substr(i, end - i));
      if (quotes && field.find('"') != std::string::npos) return "an unquoted field '" + field + "' holds a quote";
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= record.size()) return {};
    ++i;  // the delimiter
  }
}

/// Parses all of s (an optional leading +) as a T with std::from_chars; false when it is not
/// a number of T or out of its range.
template <class T>
bool parse_number(const std::string& s, T& out) {
  if (s.empty()) return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if constexpr (std::is_floating_point_v<T>) {
    if (*first == '+') ++first;  // from_chars takes no plus sign
    auto [p, ec] = std::from_chars(first, last, out);
    if (ec == std::errc::result_out_of_range) return false;
    return ec == std::errc() && p == last;
  } else {
    if (*first == '+') ++first;
    auto [p, ec] = std::from_chars(first, last, out);
    return ec == std::errc() && p == last;
  }
}

/// The CPU kernel of DecodeCSV.
struct decode_csv_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit decode_csv_kernel(const node& n)
      : types_(n.attr<std::vector<dtype>>("OUT_TYPE")), delim_(n.attr<std::string>("field_delim").at(0)),
        quotes_(n.attr<bool>("use_quote_delim")), na_(n.attr<std::string>("na_value")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& records = ctx.input(0);
    const auto columns = types_.size();
    for (std::size_t c = 0; c < columns; ++c) {
      const tensor& d = ctx.input(static_cast<int>(c) + 1);
      if (d.num_elements() > 1 || d.rank() > 1)
        fail(error_code::invalid_argument, "the default of column ", c, " must hold one value or none, got shape ", d.shape());
    }
    std::vector<tensor*> out;
    for (std::size_t c = 0; c < columns; ++c) out.push_back(&ctx.allocate_output(static_cast<int>(c), records.shape()));
    const auto* rs = records.data<std::string>();
    std::vector<std::string> fields;
    for (std::int64_t r = 0, n = records.num_elements(); r < n; ++r) {
      if (std::string why = split_csv(rs[r], delim_, quotes_, fields); !why.empty())
        fail(error_code::invalid_argument, "record ", r, " ('", rs[r], "'): ", why);
      if (fields.size() != columns)
        fail(error_code::invalid_argument, "record ", r, " ('", rs[r], "') has ", fields.size(), " fields, expected ", columns);
      for (std::size_t c = 0; c < columns; ++c) {
        const tensor& d = ctx.input(static_cast<int>(c) + 1);
        const bool missing = fields[c].empty() || (!na_.empty() && fields[c] == na_);
        if (missing && d.num_elements() == 0)
          fail(error_code::invalid_argument, "field ", c, " of record ", r, " is empty and column ", c, " has no default");
        set(*out[c], r, c, r, missing ? nullptr : &fields[c], d, rs[r]);
      }
    }
  }
  /// Element i of column c: the field parsed, or the default.
  void set(tensor& out, std::int64_t i, std::size_t c, std::int64_t r, const std::string* field, const tensor& d,
           const std::string& record) const {
    const dtype t = types_[c];
    auto bad = [&] {
      fail(error_code::invalid_argument, "field ", c, " of record ", r, " ('", *field, "' in '", record, "') is not a valid ", t);
    };
    switch (t) {
      case dtype::string:
        out.data<std::string>()[i] = field ? *field : d.data<std::string>()[0];
        break;
      case dtype::int32:
        if (!field) out.data<std::int32_t>()[i] = d.data<std::int32_t>()[0];
        else if (!parse_number(*field, out.data<std::int32_t>()[i])) bad();
        break;
      case dtype::int64:
        if (!field) out.data<std::int64_t>()[i] = d.data<std::int64_t>()[0];
        else if (!parse_number(*field, out.data<std::int64_t>()[i])) bad();
        break;
      case dtype::float32:
        if (!field) out.data<float>()[i] = d.data<float>()[0];
        else if (!parse_number(*field, out.data<float>()[i])) bad();
        break;
      case dtype::float64:
        if (!field) out.data<double>()[i] = d.data<double>()[0];
        else if (!parse_number(*field, out.data<double>()[i])) bad();
        break;
      default: fail(error_code::invalid_argument, "column ", c, " is ", t, ", which DecodeCSV does not parse");
    }
  }
 private:
  std::vector<dtype> types_;
  char delim_;
  bool quotes_;
  std::string na_;
};

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_parsing_kernels() {
  ops::register_parsing_ops();
  register_cpu_kernel<decode_raw_kernel>("DecodeRaw");
  register_cpu_kernel<decode_csv_kernel>("DecodeCSV");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp).
namespace weft {
/// Typed code's registration of every parsing op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::parsing, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_parsing_kernels(); }
};
}  // namespace weft

/// @file
/// TensorFlow's GraphDef, both ways: a weft graph as the bytes of a `tensorflow.GraphDef`
/// message (the schema TensorBoard and Netron read; TensorFlow reads it where weft's ops are
/// TensorFlow's), and a GraphDef (a frozen TensorFlow model, or one weft wrote) as a weft
/// graph.
///
/// The messages are written and read with weft's own wire codec (core/wire.hpp), with the
/// field numbers of TensorFlow's published schema (tensorflow/core/framework/graph.proto,
/// node_def.proto, attr_value.proto, tensor.proto, tensor_shape.proto, types.proto): no
/// protobuf library or generated code, so reading a GraphDef costs a program no dependency.
/// tests/data/tensorflow_graph.proto holds that schema, for protoc and the tests.
///
/// Mapping (docs/models.md):
///   node        NodeDef name, op, input ("node", "node:1", "^node" for a control input),
///               device as requested, attr: every attr of the node (type attrs included), plus
///               "_output_shapes" (each output's static shape, as TensorFlow's exporter writes
///               for TensorBoard; option) and "_class" = ["loc:@group"] for a colocation.
///   attr kinds  int i, float f (a float: a weft double attr loses its low bits), bool b,
///               string s, type type, shape shape, tensor tensor, lists in list.
///   tensors     dtype, tensor_shape, tensor_content (the elements' bytes, little-endian);
///               string tensors in string_val. Read: tensor_content or the dtype's *_val
///               field; fewer values than elements repeat the last one (TensorFlow's rule),
///               none are zeros.
/// Reading drops attrs whose names start with '_' (TensorFlow's private ones) but "_class",
/// renames VariableV2 to Variable and AddV2 to Add, drops attrs TensorFlow sets that weft's op
/// lacks only where they hold the value weft's op computes with (use_cudnn_on_gpu,
/// explicit_paddings = [], grad_a/grad_b = false, dilations of 1, Cast's Truncate = false), and fails, naming every node, op and attr, on ops
/// weft does not have and on other attrs it does not know.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/checked.hpp>
#include <weft/core/error.hpp>
#include <weft/core/file.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/tensor.hpp>
#include <weft/core/wire.hpp>
#include <weft/framework/attr.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/node.hpp>
#include <weft/ops/standard.hpp>

namespace weft {

/// TensorFlow's DataType enum (types.proto) for a weft dtype.
inline int tensorflow_dtype(dtype t) {
  switch (t) {
    case dtype::float32: return 1;
    case dtype::float64: return 2;
    case dtype::int32: return 3;
    case dtype::uint8: return 4;
    case dtype::int16: return 5;
    case dtype::int8: return 6;
    case dtype::string: return 7;
    case dtype::complex64: return 8;
    case dtype::int64: return 9;
    case dtype::boolean: return 10;
    case dtype::bfloat16: return 14;
    case dtype::uint16: return 17;
    case dtype::complex128: return 18;
    case dtype::float16: return 19;
    case dtype::uint32: return 22;
    case dtype::uint64: return 23;
    case dtype::invalid: break;
  }
  fail(error_code::invalid_argument, "tensorflow_dtype: dtype ", t, " has no TensorFlow DataType");
}

/// The weft dtype of TensorFlow DataType `code` (a reference type, code + 100, is its base
/// type); `where` prefixes the error for a code weft has no dtype for.
inline dtype from_tensorflow_dtype(std::int64_t code, const std::string& where) {
  const std::int64_t base = code > 100 && code < 200 ? code - 100 : code;
  for (int i = 1; i < dtype_count; ++i)
    if (tensorflow_dtype(static_cast<dtype>(i)) == base) return static_cast<dtype>(i);
  const char* known = nullptr;
  switch (base) {
    case 0: known = "DT_INVALID"; break;
    case 11: known = "DT_QINT8"; break;
    case 12: known = "DT_QUINT8"; break;
    case 13: known = "DT_QINT32"; break;
    case 15: known = "DT_QINT16"; break;
    case 16: known = "DT_QUINT16"; break;
    case 20: known = "DT_RESOURCE"; break;
    case 21: known = "DT_VARIANT"; break;
    default: break;
  }
  fail(error_code::unimplemented, where, ": TensorFlow DataType ", code, known ? std::string(" (") + known + ")" : std::string(),
       " has no weft dtype");
}

/// What writing a GraphDef includes beyond the nodes.
struct graph_def_options {
  /// "_output_shapes" on every node: each output's static shape (TensorBoard shows them on
  /// the edges; importing drops them).
  bool output_shapes = true;
  /// Each node's requested device; false leaves them out (a graph made on a machine with a
  /// GPU, for one without).
  bool devices = true;
};

/// What reading a GraphDef allocates at most beyond its own bytes: a tensor whose *_val
/// field holds fewer values than elements is filled to its shape, and the bytes of all such
/// tensors together may not pass `max_filled_bytes`.
struct graph_def_limits {
  std::uint64_t max_filled_bytes = std::uint64_t{1} << 30;  ///< 1 GiB by default
};

namespace graph_def_detail {

/// Field numbers of TensorFlow's messages.
namespace graph_f { inline constexpr std::uint32_t node = 1, library = 2, version = 3, versions = 4; }
namespace node_f { inline constexpr std::uint32_t name = 1, op = 2, input = 3, device = 4, attr = 5; }
namespace entry_f { inline constexpr std::uint32_t key = 1, value = 2; }
namespace attr_f {
inline constexpr std::uint32_t list = 1, s = 2, i = 3, f = 4, b = 5, type = 6, shape = 7, tensor = 8, placeholder = 9,
                               func = 10;
}
namespace list_f { inline constexpr std::uint32_t s = 2, i = 3, f = 4, b = 5, type = 6, shape = 7, tensor = 8, func = 9; }
namespace shape_f { inline constexpr std::uint32_t dim = 2, unknown_rank = 3; }
namespace dim_f { inline constexpr std::uint32_t size = 1, name = 2; }
namespace tensor_f {
inline constexpr std::uint32_t dtype = 1, shape = 2, version_number = 3, content = 4, float_val = 5, double_val = 6,
                               int_val = 7, string_val = 8, scomplex_val = 9, int64_val = 10, bool_val = 11,
                               dcomplex_val = 12, half_val = 13, resource_handle_val = 14, variant_val = 15,
                               uint32_val = 16, uint64_val = 17;
}

inline wire::writer shape_message(const partial_shape& s) {
  wire::writer w;
  if (!s.rank_known()) {
    w.boolean(shape_f::unknown_rank, true);
    return w;
  }
  for (std::int64_t d : s.dims()) {
    wire::writer dim;
    if (d != 0) dim.int64(dim_f::size, d);
    w.message(shape_f::dim, dim);
  }
  return w;
}

inline wire::writer tensor_message(const tensor& t) {
  wire::writer w;
  w.varint(tensor_f::dtype, static_cast<std::uint64_t>(tensorflow_dtype(t.dtype())));
  w.message(tensor_f::shape, shape_message(partial_shape(t.shape())));
  if (t.dtype() == dtype::string) {
    for (const std::string& e : t.flat<std::string>()) w.bytes(tensor_f::string_val, e);
  } else if (t.bytes() > 0) {
    w.bytes(tensor_f::content, std::string_view(static_cast<const char*>(t.raw_data()), t.bytes()));
  }
  return w;
}

wire::writer attr_message(const attr_value& a);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE wire::writer attr_message(const attr_value& a) {
  wire::writer w;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        wire::writer list;
        if constexpr (std::is_same_v<V, std::int64_t>) {
          w.int64(attr_f::i, v);
        } else if constexpr (std::is_same_v<V, double>) {
          w.float32(attr_f::f, static_cast<float>(v));
        } else if constexpr (std::is_same_v<V, bool>) {
          w.boolean(attr_f::b, v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          w.bytes(attr_f::s, v);
        } else if constexpr (std::is_same_v<V, dtype>) {
          w.varint(attr_f::type, static_cast<std::uint64_t>(tensorflow_dtype(v)));
        } else if constexpr (std::is_same_v<V, partial_shape>) {
          w.message(attr_f::shape, shape_message(v));
        } else if constexpr (std::is_same_v<V, tensor>) {
          w.message(attr_f::tensor, tensor_message(v));
        } else {
          if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) {
            list.packed(list_f::i, v.size(), [&](wire::writer& p, std::size_t k) { p.raw_varint(static_cast<std::uint64_t>(v[k])); });
          } else if constexpr (std::is_same_v<V, std::vector<double>>) {
            list.packed(list_f::f, v.size(), [&](wire::writer& p, std::size_t k) {
              const float f = static_cast<float>(v[k]);
              p.append(&f, 4);
            });
          } else if constexpr (std::is_same_v<V, std::vector<dtype>>) {
            list.packed(list_f::type, v.size(),
                        [&](wire::writer& p, std::size_t k) { p.raw_varint(static_cast<std::uint64_t>(tensorflow_dtype(v[k]))); });
          } else if constexpr (std::is_same_v<V, std::vector<partial_shape>>) {
            for (const auto& s : v) list.message(list_f::shape, shape_message(s));
          } else {
            static_assert(std::is_same_v<V, std::vector<std::string>>);
            for (const auto& s : v) list.bytes(list_f::s, s);
          }
          w.message(attr_f::list, list);  // written even when empty: an empty list is still a list
        }
      },
      a.value());
  return w;
}
#endif

inline void add_attr(wire::writer& node, std::string_view key, const attr_value& value) {
  wire::writer entry;
  entry.bytes(entry_f::key, key);
  entry.message(entry_f::value, attr_message(value));
  node.message(node_f::attr, entry);
}

// ---- reading

/// A TensorShapeProto: unknown_rank, or dims whose size -1 is unknown.
partial_shape read_shape(std::string_view bytes, const std::string& what);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE partial_shape read_shape(std::string_view bytes, const std::string& what) {
  wire::reader r(bytes, what);
  wire::field f;
  bool unknown_rank = false;
  std::vector<std::int64_t> dims;
  while (r.next(f)) {
    if (f.number == shape_f::unknown_rank) {
      r.expect(f, wire::wire_type::varint, "unknown_rank");
      unknown_rank = f.as_bool();
    } else if (f.number == shape_f::dim) {
      r.expect(f, wire::wire_type::bytes, "dim");
      wire::reader d(f.bytes, what + " dim " + std::to_string(dims.size()));
      wire::field g;
      std::int64_t size = 0;
      while (d.next(g))
        if (g.number == dim_f::size) {
          d.expect(g, wire::wire_type::varint, "size");
          size = g.as_int64();
        }
      if (size < unknown_dim) fail(error_code::invalid_argument, what, ": dim ", dims.size(), " has size ", size);
      if (dims.size() >= static_cast<std::size_t>(max_rank))
        fail(error_code::invalid_argument, what, ": more than ", max_rank, " dims");
      dims.push_back(size);
    }
  }
  if (unknown_rank) {
    if (!dims.empty()) fail(error_code::invalid_argument, what, ": unknown_rank with ", dims.size(), " dims");
    return partial_shape::unknown_rank();
  }
  return partial_shape(std::move(dims));
}
#endif

/// Reads a TensorProto; `filled` counts the bytes of tensors filled out from fewer values.
tensor read_tensor(std::string_view bytes, const std::string& what, std::uint64_t& filled,
                   const graph_def_limits& limits);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE tensor read_tensor(std::string_view bytes, const std::string& what, std::uint64_t& filled,
                                              const graph_def_limits& limits) {
  wire::reader r(bytes, what);
  wire::field f;
  dtype type = dtype::invalid;
  std::optional<partial_shape> dims;
  std::string_view content;
  bool has_content = false;
  // Each value field's values, as 64-bit patterns (strings apart), and which field held them.
  std::vector<std::uint64_t> values;
  std::vector<std::string_view> strings;
  std::uint32_t value_field = 0;
  auto value_of = [&](std::uint32_t number) -> std::pair<wire::wire_type, const char*> {
    switch (number) {
      case tensor_f::float_val: return {wire::wire_type::fixed32, "float_val"};
      case tensor_f::double_val: return {wire::wire_type::fixed64, "double_val"};
      case tensor_f::int_val: return {wire::wire_type::varint, "int_val"};
      case tensor_f::scomplex_val: return {wire::wire_type::fixed32, "scomplex_val"};
      case tensor_f::int64_val: return {wire::wire_type::varint, "int64_val"};
      case tensor_f::bool_val: return {wire::wire_type::varint, "bool_val"};
      case tensor_f::dcomplex_val: return {wire::wire_type::fixed64, "dcomplex_val"};
      case tensor_f::half_val: return {wire::wire_type::varint, "half_val"};
      case tensor_f::uint32_val: return {wire::wire_type::varint, "uint32_val"};
      case tensor_f::uint64_val: return {wire::wire_type::varint, "uint64_val"};
      default: return {wire::wire_type::varint, nullptr};
    }
  };
  while (r.next(f)) {
    switch (f.number) {
      case tensor_f::dtype:
        r.expect(f, wire::wire_type::varint, "dtype");
        type = from_tensorflow_dtype(f.as_int64(), what);
        break;
      case tensor_f::shape:
        r.expect(f, wire::wire_type::bytes, "tensor_shape");
        dims = read_shape(f.bytes, what + " tensor_shape");
        break;
      case tensor_f::content:
        r.expect(f, wire::wire_type::bytes, "tensor_content");
        content = f.bytes;
        has_content = true;
        break;
      case tensor_f::string_val:
        r.expect(f, wire::wire_type::bytes, "string_val");
        if (value_field && value_field != f.number)
          fail(error_code::invalid_argument, what, ": holds both string_val and another *_val field");
        value_field = f.number;
        strings.push_back(f.bytes);
        break;
      case tensor_f::resource_handle_val:
      case tensor_f::variant_val:
        fail(error_code::unimplemented, what, ": holds ", f.number == tensor_f::variant_val ? "variant" : "resource",
             " values, which weft does not have");
      default: {
        const auto kind = value_of(f.number);
        const wire::wire_type element = kind.first;
        const char* name = kind.second;  // not a structured binding: clang 14 cannot capture one
        if (!name) break;  // a field weft does not know (version_number among them): skipped
        if (value_field && value_field != f.number)
          fail(error_code::invalid_argument, what, ": holds values in two *_val fields (", name, " and field ",
               value_field, ")");
        value_field = f.number;
        r.repeated(f, element, name, [&](std::uint64_t v) {
          if (values.size() >= (std::size_t{1} << 28))
            fail(error_code::invalid_argument, what, ": more than 2^28 values in ", name);
          values.push_back(v);
        });
      }
    }
  }
  if (type == dtype::invalid) fail(error_code::invalid_argument, what, ": no dtype");
  const partial_shape ps = dims.value_or(partial_shape(std::vector<std::int64_t>{}));
  if (!ps.fully_known()) fail(error_code::invalid_argument, what, ": tensor_shape ", ps, " is not fully known");
  const shape s(ps.dims());
  const std::int64_t n = s.num_elements();
  // The value field each dtype reads (TensorFlow's TensorProto), and how many fields make one element.
  std::uint32_t expected = 0;
  std::int64_t per_element = 1;
  switch (type) {
    case dtype::float32: expected = tensor_f::float_val; break;
    case dtype::float64: expected = tensor_f::double_val; break;
    case dtype::int8: case dtype::int16: case dtype::int32: case dtype::uint8: case dtype::uint16:
      expected = tensor_f::int_val;
      break;
    case dtype::int64: expected = tensor_f::int64_val; break;
    case dtype::uint32: expected = tensor_f::uint32_val; break;
    case dtype::uint64: expected = tensor_f::uint64_val; break;
    case dtype::boolean: expected = tensor_f::bool_val; break;
    case dtype::float16: case dtype::bfloat16: expected = tensor_f::half_val; break;
    case dtype::complex64: expected = tensor_f::scomplex_val; per_element = 2; break;
    case dtype::complex128: expected = tensor_f::dcomplex_val; per_element = 2; break;
    case dtype::string: expected = tensor_f::string_val; break;
    case dtype::invalid: break;
  }
  if (value_field && value_field != expected)
    fail(error_code::invalid_argument, what, ": a ", type, " tensor with values in field ", value_field, " (",
         value_field == tensor_f::string_val ? "string_val" : value_of(value_field).second, "), not field ", expected);
  if (has_content && value_field)
    fail(error_code::invalid_argument, what, ": holds both tensor_content and *_val values");
  if (has_content && type == dtype::string)
    fail(error_code::unimplemented, what, ": a string tensor in tensor_content (weft reads string_val)");

  // The tensor's bytes in memory (a string tensor's strings counted as their objects).
  const std::uint64_t tensor_bytes =
      checked_byte_size(n, type == dtype::string ? sizeof(std::string) : size_of(type), what.c_str());
  if (has_content) {
    if (content.size() != tensor_bytes)
      fail(error_code::invalid_argument, what, ": tensor_content has ", content.size(), " bytes; a ", type, s, " tensor has ",
           tensor_bytes);
    tensor t(type, s);
    if (!content.empty()) std::memcpy(t.raw_data(), content.data(), content.size());
    if (type == dtype::boolean)  // a byte other than 0 or 1 is no bool: any non-zero byte is true
      for (auto* b = static_cast<unsigned char*>(t.raw_data()), *end = b + content.size(); b != end; ++b) *b = *b != 0;
    return t;
  }
  const std::int64_t given = type == dtype::string ? static_cast<std::int64_t>(strings.size())
                                                   : static_cast<std::int64_t>(values.size()) / per_element;
  if (type != dtype::string && static_cast<std::int64_t>(values.size()) % per_element != 0)
    fail(error_code::invalid_argument, what, ": ", values.size(), " numbers for a ", type, " tensor (two make an element)");
  if (given > n) fail(error_code::invalid_argument, what, ": ", given, " values for a ", type, s, " tensor of ", n, " elements");
  if (given < n) {
    if (tensor_bytes > limits.max_filled_bytes - std::min(filled, limits.max_filled_bytes))
      fail(error_code::resource_exhausted, what, ": filling a ", type, s, " tensor from ", given,
           given == 1 ? " value" : " values", " takes ", tensor_bytes, " bytes, past the reader's limit of ",
           limits.max_filled_bytes, " for filled tensors (graph_def_limits)");
    filled += tensor_bytes;
  }
  tensor t(type, s);
  // Element i takes value min(i, given - 1); none given: zeros (empty strings).
  auto source = [&](std::int64_t i) { return static_cast<std::size_t>(std::min(i, given - 1)); };
  auto fill = [&]<class T>(auto convert) {
    T* out = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) out[i] = given == 0 ? T{} : convert(source(i));
  };
  switch (type) {
    case dtype::float32: fill.template operator()<float>([&](std::size_t k) { return std::bit_cast<float>(static_cast<std::uint32_t>(values[k])); }); break;
    case dtype::float64: fill.template operator()<double>([&](std::size_t k) { return std::bit_cast<double>(values[k]); }); break;
    case dtype::int8: fill.template operator()<std::int8_t>([&](std::size_t k) { return static_cast<std::int8_t>(values[k]); }); break;
    case dtype::int16: fill.template operator()<std::int16_t>([&](std::size_t k) { return static_cast<std::int16_t>(values[k]); }); break;
    case dtype::int32: fill.template operator()<std::int32_t>([&](std::size_t k) { return static_cast<std::int32_t>(values[k]); }); break;
    case dtype::int64: fill.template operator()<std::int64_t>([&](std::size_t k) { return static_cast<std::int64_t>(values[k]); }); break;
    case dtype::uint8: fill.template operator()<std::uint8_t>([&](std::size_t k) { return static_cast<std::uint8_t>(values[k]); }); break;
    case dtype::uint16: fill.template operator()<std::uint16_t>([&](std::size_t k) { return static_cast<std::uint16_t>(values[k]); }); break;
    case dtype::uint32: fill.template operator()<std::uint32_t>([&](std::size_t k) { return static_cast<std::uint32_t>(values[k]); }); break;
    case dtype::uint64: fill.template operator()<std::uint64_t>([&](std::size_t k) { return values[k]; }); break;
    case dtype::boolean: fill.template operator()<bool>([&](std::size_t k) { return values[k] != 0; }); break;
    case dtype::float16:
      fill.template operator()<half>([&](std::size_t k) { return Eigen::numext::bit_cast<half>(static_cast<std::uint16_t>(values[k])); });
      break;
    case dtype::bfloat16:
      fill.template operator()<bfloat16>(
          [&](std::size_t k) { return Eigen::numext::bit_cast<bfloat16>(static_cast<std::uint16_t>(values[k])); });
      break;
    case dtype::complex64:
      fill.template operator()<complex64>([&](std::size_t k) {
        return complex64(std::bit_cast<float>(static_cast<std::uint32_t>(values[2 * k])),
                         std::bit_cast<float>(static_cast<std::uint32_t>(values[2 * k + 1])));
      });
      break;
    case dtype::complex128:
      fill.template operator()<complex128>(
          [&](std::size_t k) { return complex128(std::bit_cast<double>(values[2 * k]), std::bit_cast<double>(values[2 * k + 1])); });
      break;
    case dtype::string: fill.template operator()<std::string>([&](std::size_t k) { return std::string(strings[k]); }); break;
    case dtype::invalid: break;
  }
  return t;
}
#endif

/// An AttrValue as read, before the op's definition says which kind an empty list is.
struct read_attr {
  attr_value value;
  bool empty_list = false;
};

read_attr read_attr_value(std::string_view bytes, const std::string& what, std::uint64_t& filled,
                          const graph_def_limits& limits);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE read_attr read_attr_value(std::string_view bytes, const std::string& what, std::uint64_t& filled,
                                                     const graph_def_limits& limits) {
  wire::reader r(bytes, what);
  wire::field f;
  std::optional<read_attr> out;
  auto set = [&](attr_value v, bool empty_list = false) {
    if (out) fail(error_code::invalid_argument, what, ": holds two values (an AttrValue is one of them)");
    out = read_attr{std::move(v), empty_list};
  };
  while (r.next(f)) {
    switch (f.number) {
      case attr_f::s: r.expect(f, wire::wire_type::bytes, "s"); set(std::string(f.bytes)); break;
      case attr_f::i: r.expect(f, wire::wire_type::varint, "i"); set(f.as_int64()); break;
      case attr_f::f: r.expect(f, wire::wire_type::fixed32, "f"); set(static_cast<double>(f.as_float())); break;
      case attr_f::b: r.expect(f, wire::wire_type::varint, "b"); set(f.as_bool()); break;
      case attr_f::type: r.expect(f, wire::wire_type::varint, "type"); set(from_tensorflow_dtype(f.as_int64(), what)); break;
      case attr_f::shape: r.expect(f, wire::wire_type::bytes, "shape"); set(read_shape(f.bytes, what)); break;
      case attr_f::tensor: r.expect(f, wire::wire_type::bytes, "tensor"); set(read_tensor(f.bytes, what, filled, limits)); break;
      case attr_f::func: fail(error_code::unimplemented, what, ": a function (func), which weft's attrs do not hold");
      case attr_f::placeholder: fail(error_code::unimplemented, what, ": a function's placeholder, which weft does not have");
      case attr_f::list: {
        r.expect(f, wire::wire_type::bytes, "list");
        wire::reader l(f.bytes, what + " list");
        wire::field g;
        std::vector<std::int64_t> ints;
        std::vector<double> reals;
        std::vector<dtype> types;
        std::vector<partial_shape> shapes;
        std::vector<std::string> strings;
        int kinds = 0;
        std::uint32_t last = 0;
        auto note = [&](std::uint32_t number) {
          if (number != last) ++kinds, last = number;
          if (kinds > 1) fail(error_code::invalid_argument, what, ": a list of two kinds");
        };
        auto bound = [&](std::size_t size) {
          if (size >= static_cast<std::size_t>(graph::max_list_length))
            fail(error_code::invalid_argument, what, ": a list of more than ", graph::max_list_length, " entries");
        };
        while (l.next(g)) {
          switch (g.number) {
            case list_f::s: l.expect(g, wire::wire_type::bytes, "list.s"); note(g.number); bound(strings.size()); strings.emplace_back(g.bytes); break;
            case list_f::i: note(g.number); l.repeated(g, wire::wire_type::varint, "list.i", [&](std::uint64_t v) { bound(ints.size()); ints.push_back(static_cast<std::int64_t>(v)); }); break;
            case list_f::f: note(g.number); l.repeated(g, wire::wire_type::fixed32, "list.f", [&](std::uint64_t v) { bound(reals.size()); reals.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(v))); }); break;
            case list_f::type:
              note(g.number);
              l.repeated(g, wire::wire_type::varint, "list.type", [&](std::uint64_t v) {
                bound(types.size());
                types.push_back(from_tensorflow_dtype(static_cast<std::int64_t>(v), what));
              });
              break;
            case list_f::shape: l.expect(g, wire::wire_type::bytes, "list.shape"); note(g.number); bound(shapes.size()); shapes.push_back(read_shape(g.bytes, what)); break;
            case list_f::b: {
              bool any = false;
              l.repeated(g, wire::wire_type::varint, "list.b", [&](std::uint64_t) { any = true; });
              if (any) fail(error_code::unimplemented, what, ": a list(bool), which weft's attrs do not hold");
              break;
            }
            case list_f::tensor: fail(error_code::unimplemented, what, ": a list(tensor), which weft's attrs do not hold");
            case list_f::func: fail(error_code::unimplemented, what, ": a list(func), which weft's attrs do not hold");
            default: break;
          }
        }
        switch (last) {
          case list_f::s: set(std::move(strings)); break;
          case list_f::i: set(std::move(ints)); break;
          case list_f::f: set(std::move(reals)); break;
          case list_f::type: set(std::move(types)); break;
          case list_f::shape: set(std::move(shapes)); break;
          default: set(std::vector<std::int64_t>{}, true); break;
        }
        break;
      }
      default: break;
    }
  }
  if (!out) fail(error_code::invalid_argument, what, ": holds no value");
  return std::move(*out);
}
#endif

/// TensorFlow attrs that weft's ops leave out, and the values with which weft's op computes
/// the same thing: such an attr is dropped on import.
inline bool harmless_tensorflow_attr(std::string_view key, const attr_value& v) {
  if (key == "use_cudnn_on_gpu") return v.kind() == attr_kind::boolean;
  if (key == "Truncate") return v.get_if<bool>() && !*v.get_if<bool>();  // Cast's: false rounds, as weft's Cast
  if (key == "grad_a" || key == "grad_b") return v.get_if<bool>() && !*v.get_if<bool>();
  if (key == "explicit_paddings") {
    const auto* l = v.get_if<std::vector<std::int64_t>>();
    return l && l->empty();
  }
  if (key == "dilations") {
    const auto* l = v.get_if<std::vector<std::int64_t>>();
    return l && std::all_of(l->begin(), l->end(), [](std::int64_t d) { return d == 1; });
  }
  return false;
}

}  // namespace graph_def_detail

/// The bytes of a tensorflow.GraphDef holding every node of `g`, in the graph's order.
std::string to_graph_def(const graph& g, const graph_def_options& options = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::string to_graph_def(const graph& g, const graph_def_options& options) {
  using namespace graph_def_detail;
  wire::writer out;
  for (int id = 0; id < g.size(); ++id) {
    const node& n = g.at(id);
    wire::writer w;
    w.bytes(node_f::name, n.name());
    w.bytes(node_f::op, n.op());
    for (const output& in : n.inputs()) {
      const std::string& source = g.at(in).name();
      w.bytes(node_f::input, in.port == 0 ? source : source + ":" + std::to_string(in.port));
    }
    for (int c : n.control_inputs()) w.bytes(node_f::input, "^" + g.at(c).name());
    if (options.devices && !n.device().empty()) w.bytes(node_f::device, n.device());
    for (const auto& [key, value] : n.attrs().entries()) add_attr(w, key, value);
    if (!n.colocation().empty()) add_attr(w, "_class", std::vector<std::string>{"loc:@" + n.colocation()});
    if (options.output_shapes && n.num_outputs() > 0) {
      std::vector<partial_shape> shapes;
      for (int k = 0; k < n.num_outputs(); ++k) shapes.push_back(n.output_shape(k));
      add_attr(w, "_output_shapes", std::move(shapes));
    }
    out.message(graph_f::node, w);
  }
  return out.take();
}
#endif

/// The nodes of a GraphDef's bytes as node specs, in the file's order, with TensorFlow's
/// spellings mapped to weft's (above). Throws weft::error naming the node, op and attr; every
/// op weft does not have is named in one error.
std::vector<node_spec> parse_graph_def(std::string_view bytes, const graph_def_limits& limits = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<node_spec> parse_graph_def(std::string_view bytes, const graph_def_limits& limits) {
  using namespace graph_def_detail;
  std::vector<node_spec> specs;
  std::uint64_t filled = 0;
  std::map<std::string, std::vector<std::string>> missing_ops;  // op -> nodes
  wire::reader r(bytes, "GraphDef");
  wire::field f;
  while (r.next(f)) {
    if (f.number != graph_f::node) continue;  // versions, library: weft reads nodes only
    r.expect(f, wire::wire_type::bytes, "node");
    const std::string where = "GraphDef node " + std::to_string(specs.size());
    wire::reader nr(f.bytes, where);
    wire::field g;
    node_spec s;
    std::vector<std::pair<std::string, read_attr>> attrs;
    while (nr.next(g)) {
      switch (g.number) {
        case node_f::name: nr.expect(g, wire::wire_type::bytes, "name"); s.name = g.bytes; break;
        case node_f::op: nr.expect(g, wire::wire_type::bytes, "op"); s.op = g.bytes; break;
        case node_f::input:
          nr.expect(g, wire::wire_type::bytes, "input");
          if (s.inputs.size() >= static_cast<std::size_t>(graph::max_list_length))
            fail(error_code::invalid_argument, where, ": more than ", graph::max_list_length, " inputs");
          s.inputs.emplace_back(g.bytes);
          break;
        case node_f::device: nr.expect(g, wire::wire_type::bytes, "device"); s.device = g.bytes; break;
        case node_f::attr: {
          nr.expect(g, wire::wire_type::bytes, "attr");
          wire::reader er(g.bytes, where + " attr entry");
          wire::field e;
          std::string key;
          std::string_view value;
          bool has_value = false;
          while (er.next(e)) {
            if (e.number == entry_f::key) {
              er.expect(e, wire::wire_type::bytes, "key");
              key = e.bytes;
            } else if (e.number == entry_f::value) {
              er.expect(e, wire::wire_type::bytes, "value");
              value = e.bytes;
              has_value = true;
            }
          }
          const std::string who = where + (s.name.empty() ? std::string() : " '" + s.name + "'") + " attr '" + key + "'";
          if (!has_value) fail(error_code::invalid_argument, who, ": has no value");
          if (key.starts_with('_') && key != "_class") break;  // TensorFlow's private attrs
          attrs.emplace_back(key, read_attr_value(value, who, filled, limits));
          break;
        }
        default: break;
      }
    }
    const std::string who = "node '" + s.name + "' (" + s.op + ")";
    if (s.name.empty()) fail(error_code::invalid_argument, where, " (", s.op, "): has no name");
    if (s.op.empty()) fail(error_code::invalid_argument, who, ": has no op");
    if (s.op == "VariableV2") s.op = "Variable";
    if (s.op == "AddV2") s.op = "Add";  // TensorFlow 2's Add: the same op on numbers, weft's Add
    const op_def* def = op_registry::global().find(s.op);
    if (!def && ops::standard_op_family(s.op) == "control") {
      ops::register_control_flow_ops();
      def = op_registry::global().find(s.op);
    }
    if (!def) {
      missing_ops[s.op].push_back(s.name);
      specs.push_back(std::move(s));
      continue;
    }
    for (auto& [key, a] : attrs) {
      if (key == "_class") {
        const auto* l = a.value.get_if<std::vector<std::string>>();
        if (!l && !a.empty_list) fail(error_code::invalid_argument, who, ": attr '_class' is not a list of strings");
        if (l)
          for (const auto& entry : *l)
            if (entry.starts_with("loc:@")) {
              s.colocate_with = entry.substr(5);
              break;
            }
        continue;
      }
      const attr_def* ad = def->find_attr(key);
      if (!ad) {
        if (harmless_tensorflow_attr(key, a.value)) continue;
        std::ostringstream shown;
        shown << a.value;
        fail(error_code::unimplemented, who, ": attr '", key, "' = ", shown.str(), " is not one weft's ", s.op,
             " has (it has ", [&] {
               std::string names;
               for (const auto& d : def->attrs) names += (names.empty() ? "" : ", ") + d.name;
               return names.empty() ? std::string("none") : names;
             }(), ")");
      }
      if (a.empty_list) {
        switch (ad->kind) {
          case attr_kind::real_list: a.value = std::vector<double>{}; break;
          case attr_kind::type_list: a.value = std::vector<dtype>{}; break;
          case attr_kind::shape_list: a.value = std::vector<partial_shape>{}; break;
          case attr_kind::string_list: a.value = std::vector<std::string>{}; break;
          default: break;
        }
      }
      s.attrs.set(key, std::move(a.value));
    }
    specs.push_back(std::move(s));
  }
  if (!missing_ops.empty()) {
    std::ostringstream msg;
    std::size_t k = 0;
    for (const auto& [op, nodes] : missing_ops) {
      msg << (k++ ? "; " : "") << "'" << op << "' (";
      const auto family = ops::standard_op_family(op);
      for (std::size_t i = 0; i < nodes.size() && i < 3; ++i) msg << (i ? ", " : "") << "node '" << nodes[i] << "'";
      if (nodes.size() > 3) msg << " and " << nodes.size() - 3 << " more";
      msg << ")";
      if (!family.empty()) msg << ": one of weft's " << family << " ops, not registered: call " << ops::family_registration_hint(family);
    }
    fail(error_code::unimplemented, "GraphDef: ", missing_ops.size(), missing_ops.size() == 1 ? " op" : " ops",
         " that this program does not have: ", msg.str());
  }
  return specs;
}
#endif

/// Adds the nodes of a GraphDef's bytes to `g`, all or nothing (graph::import).
inline void import_graph_def(graph& g, std::string_view bytes, const graph_def_limits& limits = {}) {
  g.import(parse_graph_def(bytes, limits));
}

/// Writes `g` as a GraphDef file, atomically; reads one into a new graph.
inline void write_graph_def(const graph& g, const std::filesystem::path& path, const graph_def_options& options = {}) {
  weft::detail::write_file_atomically(path, to_graph_def(g, options), {}, "the GraphDef");
}
/// Reads the GraphDef file at `path` into a new graph (errors name the file and the node).
inline graph read_graph_def(const std::filesystem::path& path, const graph_def_limits& limits = {}) {
  graph g;
  const std::string bytes = read_file(path, "the GraphDef");
  try {
    import_graph_def(g, bytes, limits);
  } catch (const error& e) {
    fail(e.code(), path.string(), ": ", e.what());
  }
  return g;
}

}  // namespace weft

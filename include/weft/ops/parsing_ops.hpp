/// @file
/// Decoders of the records readers give (TensorFlow's parsing ops):
///   DecodeRaw(bytes: string; out_type, little_endian) -> output   each string's bytes as
///       elements of out_type: output has bytes' dims and one more, the element count, the
///       same for every string (an MNIST image record: [784] uint8)
///   DecodeCSV(records: string, record_defaults...; OUT_TYPE, field_delim, use_quote_delim,
///       na_value) -> output...   each record's fields, one output per column, of records'
///       shape: int32, int64, float32, float64 or string; a column's default (a tensor of
///       one value, or of none: the field is required) stands in for an empty field or one
///       equal to na_value; fields may be quoted ("a,b" and "say ""hi""") unless
///       use_quote_delim is false
#pragma once

#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

/// The parsing family's op definitions (registered by register_parsing_ops()).
std::vector<op_def> parsing_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> parsing_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("DecodeRaw")
                     .input("bytes: string")
                     .output("output: out_type")
                     .attr("out_type: type")
                     .attr("little_endian: bool = true")
                     .shape_fn([](shape_context& c) {
                       const auto& in = c.input(0);
                       if (!in.rank_known()) return;
                       auto dims = in.dims();
                       dims.push_back(unknown_dim);
                       c.set_output(0, partial_shape(dims));
                     })
                     .build());
  defs.push_back(op_def_builder("DecodeCSV")
                     .input("records: string")
                     .input("record_defaults: OUT_TYPE")
                     .output("output: OUT_TYPE")
                     .attr("OUT_TYPE: list(type)")
                     .attr("field_delim: string = ','")
                     .attr("use_quote_delim: bool = true")
                     .attr("na_value: string = ''")
                     .shape_fn([](shape_context& c) {
                       const auto& types = c.attr<std::vector<dtype>>("OUT_TYPE");
                       if (types.empty()) c.fail("needs at least one column (OUT_TYPE is empty)");
                       for (std::size_t i = 0; i < types.size(); ++i) {
                         const dtype t = types[i];
                         if (t != dtype::int32 && t != dtype::int64 && t != dtype::float32 && t != dtype::float64 &&
                             t != dtype::string)
                           c.fail("column ", i, " is ", t, ": a column is int32, int64, float32, float64 or string");
                         const auto& d = c.input(static_cast<int>(i) + 1);
                         if (d.rank_known() && (d.rank() > 1 || (d.rank() == 1 && d[0] > 1)))
                           c.fail("the default of column ", i, " must hold one value or none, got shape ", d);
                       }
                       if (c.attr<std::string>("field_delim").size() != 1)
                         c.fail("field_delim must be one character, got '", c.attr<std::string>("field_delim"), "'");
                       for (std::size_t i = 0; i < types.size(); ++i) c.set_output(static_cast<int>(i), c.input(0));
                     })
                     .build());
  return defs;
}
#endif

/// Adds the parsing ops to the global registry, once; registering the family's kernels calls it.
inline void register_parsing_ops() { op_registry::global().add_family("parsing", parsing_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(DecodeRaw, parsing)
WEFT_DETAIL_OP_TYPE(DecodeCSV, parsing)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The parsing family as a C++ type: use_kernels<ops::families::parsing>() registers its ops and kernels.
struct parsing {
  static constexpr const char* name = "parsing";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<DecodeRaw, DecodeCSV>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_parsing_ops(); }
};
}  // namespace families

}  // namespace weft::ops

/// @file
/// File ops. Checkpoint ops: every tensor of a model in one file (runtime/checkpoint_file.hpp),
/// as graph nodes; the file name is a string scalar, as in TensorFlow's SaveV2 and RestoreV2.
///   Save(filename, tensors...; tensor_names, T)  writes the tensors under their names,
///                                                  atomically (temporary file, fsync, rename)
///   Restore(filename; tensor_names, dtypes, shapes) -> tensors...
///                                                  reads and checks the whole file, then
///                                                  outputs the named tensors, each checked
///                                                  against its dtype and shape
/// Readers (runtime/reader.hpp; records cut by runtime/records.hpp), resources made by
///   TFRecordReader, FixedLengthRecordReader(header_bytes, record_bytes, footer_bytes,
///   hop_bytes), TextLineReader(skip_header_lines), WholeFileReader (each with container,
///   shared_name, compression_type "" | "GZIP" | "ZLIB") -> reader_handle
///   ReaderRead(reader_handle, queue_handle) -> key, value      one record; file names come
///       from the queue (strings), a waiting read holds no thread; out_of_range at the end
///   ReaderReadUpTo(reader_handle, queue_handle, num_records) -> keys, values
///   ReaderNumRecordsProduced, ReaderNumWorkUnitsCompleted (files done) -> int64; ReaderReset
///   ReadFile(filename) -> contents      WriteFile(filename, contents) (atomically)
#pragma once

#include <string_view>

#include <set>
#include <string>
#include <vector>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

namespace detail {
/// The inputs and names of a Save or Restore: the file name a scalar, one name per tensor,
/// distinct and non-empty.
inline void check_file_and_names(shape_context& c, std::size_t tensors) {
  require_rank(c, 0, 0, "filename");
  const auto& names = c.attr<std::vector<std::string>>("tensor_names");
  if (names.size() != tensors) c.fail(names.size(), " tensor_names for ", tensors, " tensors");
  std::set<std::string> seen;
  for (const auto& n : names)
    if (n.empty() || !seen.insert(n).second) c.fail("tensor_names must be distinct and non-empty, got '", n, "' twice or empty");
}
}  // namespace detail

/// The io family's op definitions (registered by register_io_ops()).
std::vector<op_def> io_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> io_op_defs() {
  std::vector<op_def> defs;
  defs.push_back(op_def_builder("Save")
                     .input("filename: string")
                     .input("tensors: T")
                     .attr("tensor_names: list(string)")
                     .attr("T: list(type)")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       detail::check_file_and_names(c, static_cast<std::size_t>(c.num_inputs() - 1));
                     })
                     .build());
  defs.push_back(op_def_builder("Restore")
                     .input("filename: string")
                     .output("tensors: dtypes")
                     .attr("tensor_names: list(string)")
                     .attr("dtypes: list(type)")
                     .attr("shapes: list(shape)")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       const auto& shapes = c.attr<std::vector<partial_shape>>("shapes");
                       const auto n = c.attr<std::vector<dtype>>("dtypes").size();
                       detail::check_file_and_names(c, n);
                       if (shapes.size() != n) c.fail(shapes.size(), " shapes for ", n, " tensors");
                       for (std::size_t i = 0; i < n; ++i) c.set_output(static_cast<int>(i), shapes[i]);
                     })
                     .build());
  for (const char* name : {"TFRecordReader", "FixedLengthRecordReader", "TextLineReader", "WholeFileReader"}) {
    op_def_builder b(name);
    b.output("reader_handle: string")
        .attr("container: string = ''")
        .attr("shared_name: string = ''")
        .attr("compression_type: string = ''")
        .stateful()
        .cheap();
    const std::string_view n(name);
    if (n == "FixedLengthRecordReader")
      b.attr("header_bytes: int = 0").attr("record_bytes: int").attr("footer_bytes: int = 0").attr("hop_bytes: int = 0");
    if (n == "TextLineReader") b.attr("skip_header_lines: int = 0");
    defs.push_back(b.shape_fn([fixed = n == "FixedLengthRecordReader"](shape_context& c) {
                      const auto& kind = c.attr<std::string>("compression_type");
                      if (!kind.empty() && kind != "NONE" && kind != "GZIP" && kind != "ZLIB")
                        c.fail("unknown compression_type '", kind, "' (\"\", \"GZIP\" or \"ZLIB\")");
                      if (fixed) {
                        if (c.attr<std::int64_t>("record_bytes") <= 0)
                          c.fail("record_bytes must be positive, got ", c.attr<std::int64_t>("record_bytes"));
                        for (const char* a : {"header_bytes", "footer_bytes", "hop_bytes"})
                          if (c.attr<std::int64_t>(a) < 0) c.fail(a, " must not be negative, got ", c.attr<std::int64_t>(a));
                      }
                      c.set_output(0, partial_shape({2}));
                    })
                    .build());
  }
  defs.push_back(op_def_builder("ReaderRead")
                     .input("reader_handle: string")
                     .input("queue_handle: string")
                     .output("key: string")
                     .output("value: string")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 1, "reader_handle");
                       require_rank(c, 1, 1, "queue_handle");
                       c.set_output(0, partial_shape({}));
                       c.set_output(1, partial_shape({}));
                     })
                     .build());
  defs.push_back(op_def_builder("ReaderReadUpTo")
                     .input("reader_handle: string")
                     .input("queue_handle: string")
                     .input("num_records: int64")
                     .output("keys: string")
                     .output("values: string")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 1, "reader_handle");
                       require_rank(c, 1, 1, "queue_handle");
                       require_rank(c, 2, 0, "num_records");
                       c.set_output(0, partial_shape({unknown_dim}));
                       c.set_output(1, partial_shape({unknown_dim}));
                     })
                     .build());
  for (const char* name : {"ReaderNumRecordsProduced", "ReaderNumWorkUnitsCompleted"})
    defs.push_back(op_def_builder(name)
                       .input("reader_handle: string")
                       .output("count: int64")
                       .stateful()
                       .cheap()
                       .shape_fn([](shape_context& c) {
                         require_rank(c, 0, 1, "reader_handle");
                         c.set_output(0, partial_shape({}));
                       })
                       .build());
  defs.push_back(op_def_builder("ReaderReset")
                     .input("reader_handle: string")
                     .stateful()
                     .cheap()
                     .shape_fn([](shape_context& c) { require_rank(c, 0, 1, "reader_handle"); })
                     .build());
  defs.push_back(op_def_builder("ReadFile")
                     .input("filename: string")
                     .output("contents: string")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "filename");
                       c.set_output(0, partial_shape({}));
                     })
                     .build());
  defs.push_back(op_def_builder("WriteFile")
                     .input("filename: string")
                     .input("contents: string")
                     .stateful()
                     .shape_fn([](shape_context& c) {
                       require_rank(c, 0, 0, "filename");
                       require_rank(c, 1, 0, "contents");
                     })
                     .build());
  return defs;
}
#endif

/// Adds the checkpoint ops to the global registry, once; registering the family's kernels
/// calls it.
inline void register_io_ops() { op_registry::global().add_family("io", io_op_defs); }

/// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(Save, io)
WEFT_DETAIL_OP_TYPE(Restore, io)
WEFT_DETAIL_OP_TYPE(TFRecordReader, io)
WEFT_DETAIL_OP_TYPE(FixedLengthRecordReader, io)
WEFT_DETAIL_OP_TYPE(TextLineReader, io)
WEFT_DETAIL_OP_TYPE(WholeFileReader, io)
WEFT_DETAIL_OP_TYPE(ReaderRead, io)
WEFT_DETAIL_OP_TYPE(ReaderReadUpTo, io)
WEFT_DETAIL_OP_TYPE(ReaderNumRecordsProduced, io)
WEFT_DETAIL_OP_TYPE(ReaderNumWorkUnitsCompleted, io)
WEFT_DETAIL_OP_TYPE(ReaderReset, io)
WEFT_DETAIL_OP_TYPE(ReadFile, io)
WEFT_DETAIL_OP_TYPE(WriteFile, io)
namespace families {  // the whole family (its kernels for every dtype, on each device type)
/// The io family as a C++ type: use_kernels<ops::families::io>() registers its ops and kernels.
struct io {
  static constexpr const char* name = "io";  ///< the family's name
  static constexpr bool in_cpu_registry = true;  ///< the full CPU kernel registry has its kernels
  using types = type_list<Save, Restore, TFRecordReader, FixedLengthRecordReader, TextLineReader, WholeFileReader, ReaderRead,
                          ReaderReadUpTo, ReaderNumRecordsProduced, ReaderNumWorkUnitsCompleted, ReaderReset, ReadFile,
                          WriteFile>;  ///< its op types
  /// Registers the family's op definitions.
  static void define() { register_io_ops(); }
};
}  // namespace families

}  // namespace weft::ops

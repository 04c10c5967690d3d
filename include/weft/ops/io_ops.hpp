// Checkpoint ops: every tensor of a model in one file (runtime/checkpoint_file.hpp), as
// graph nodes; the file name is a string scalar, as in TensorFlow's SaveV2 and RestoreV2.
//   Save(filename, tensors...; tensor_names, T)  writes the tensors under their names,
//                                                  atomically (temporary file, fsync, rename)
//   Restore(filename; tensor_names, dtypes, shapes) -> tensors...
//                                                  reads and checks the whole file, then
//                                                  outputs the named tensors, each checked
//                                                  against its dtype and shape
#pragma once

#include <set>
#include <string>
#include <vector>

#include <weft/framework/op_def.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::ops {

namespace detail {
// The inputs and names of a Save or Restore: the file name a scalar, one name per tensor,
// distinct and non-empty.
inline void check_file_and_names(shape_context& c, std::size_t tensors) {
  require_rank(c, 0, 0, "filename");
  const auto& names = c.attr<std::vector<std::string>>("tensor_names");
  if (names.size() != tensors) c.fail(names.size(), " tensor_names for ", tensors, " tensors");
  std::set<std::string> seen;
  for (const auto& n : names)
    if (n.empty() || !seen.insert(n).second) c.fail("tensor_names must be distinct and non-empty, got '", n, "' twice or empty");
}
}  // namespace detail

inline std::vector<op_def> io_op_defs() {
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
  return defs;
}

// Adds the checkpoint ops to the global registry, once; registering the family's kernels
// calls it.
inline void register_io_ops() { op_registry::global().add_family("io", io_op_defs); }

// The ops of this family as C++ types (framework/kernel_for.hpp).
WEFT_DETAIL_OP_TYPE(Save, io)
WEFT_DETAIL_OP_TYPE(Restore, io)
// The whole family (its kernels for every dtype, on each device type).
namespace families {
struct io {
  static constexpr const char* name = "io";
  static constexpr bool in_cpu_registry = true;
  using types = type_list<Save, Restore>;  // its op types
  static void define() { register_io_ops(); }
};
}  // namespace families

}  // namespace weft::ops

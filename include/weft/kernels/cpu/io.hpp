// CPU kernels for ops/io_ops.hpp: Save and Restore, over the checkpoint file of
// runtime/checkpoint_file.hpp.
#pragma once

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <weft/kernels/cpu/common.hpp>
#include <weft/ops/io_ops.hpp>
#include <weft/runtime/checkpoint_file.hpp>

namespace weft::cpu {

using weft::filename_tensor;
using weft::path_of;

struct save_kernel final : op_kernel {
  explicit save_kernel(const node& n) : names_(n.attr<std::vector<std::string>>("tensor_names")) {}
  void compute(kernel_context& ctx) const override {
    std::vector<std::pair<std::string, tensor>> named;
    for (int i = 1; i < ctx.num_inputs(); ++i) named.emplace_back(names_[static_cast<std::size_t>(i - 1)], ctx.input(i));
    write_checkpoint(path_of(ctx.input(0)), named);
  }
  std::vector<std::string> names_;
};

struct restore_kernel final : op_kernel {
  explicit restore_kernel(const node& n)
      : names_(n.attr<std::vector<std::string>>("tensor_names")),
        dtypes_(n.attr<std::vector<dtype>>("dtypes")),
        shapes_(n.attr<std::vector<partial_shape>>("shapes")) {}
  // Every output is checked before any is set: a bad file sets none.
  void compute(kernel_context& ctx) const override {
    const std::filesystem::path file = path_of(ctx.input(0));
    auto stored = read_checkpoint(file);
    std::map<std::string, tensor> by_name(std::make_move_iterator(stored.begin()), std::make_move_iterator(stored.end()));
    std::vector<tensor> out;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      auto it = by_name.find(names_[i]);
      if (it == by_name.end())
        fail(error_code::not_found, "the checkpoint ", file.string(), " has no tensor for variable '", names_[i], "'");
      const tensor& t = it->second;
      if (t.dtype() != dtypes_[i] || !shapes_[i].accepts(t.shape()))
        fail(error_code::invalid_argument, "the checkpoint ", file.string(), " holds '", names_[i], "' as ", t.dtype(),
             t.shape(), ", but the variable is ", dtypes_[i], shapes_[i]);
      out.push_back(t);
    }
    for (std::size_t i = 0; i < out.size(); ++i) ctx.set_output(static_cast<int>(i), std::move(out[i]));
  }
  std::vector<std::string> names_;
  std::vector<dtype> dtypes_;
  std::vector<partial_shape> shapes_;
};

// A template, so that including this header instantiates nothing until it is called (a
// saver asks for it through kernel_for<ops::families::io, void, device_types::cpu>).
template <int = 0>
void register_io_kernels() {
  ops::register_io_ops();
  register_cpu_kernel<save_kernel>("Save");
  register_cpu_kernel<restore_kernel>("Restore");
}

}  // namespace weft::cpu

// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Save, T, device_types::cpu> {
  static void register_kernels() { register_cpu_kernel<cpu::save_kernel>("Save"); }
};
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Restore, T, device_types::cpu> {
  static void register_kernels() { register_cpu_kernel<cpu::restore_kernel>("Restore"); }
};
template <class T>  // a partial specialization, so that including it instantiates nothing
struct kernel_for<ops::families::io, T, device_types::cpu> {
  static void register_kernels() { cpu::register_io_kernels(); }
};
}  // namespace weft

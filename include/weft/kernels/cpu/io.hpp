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

// The path held by a uint8 vector of its bytes (a file name input).
inline std::filesystem::path path_of(const tensor& bytes) {
  if (bytes.dtype() != dtype::uint8 || bytes.rank() != 1)
    fail(error_code::invalid_argument, "filename must be a uint8 vector of the path's bytes, got ", bytes.dtype(), bytes.shape());
  const auto* p = bytes.data<std::uint8_t>();
  std::string s(reinterpret_cast<const char*>(p), static_cast<std::size_t>(bytes.num_elements()));
  if (s.empty() || s.find('\0') != std::string::npos)
    fail(error_code::invalid_argument, "filename must be a non-empty path without NUL bytes");
  return s;
}
// A path as the uint8 vector Save and Restore take.
inline tensor filename_tensor(const std::filesystem::path& path) {
  const std::string s = path.string();
  tensor t(dtype::uint8, shape{static_cast<std::int64_t>(s.size())});
  if (!s.empty()) std::memcpy(t.raw_data(), s.data(), s.size());
  return t;
}

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

// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_io_kernels() {
  ops::register_io_ops();
  register_cpu_kernel<save_kernel>("Save");
  register_cpu_kernel<restore_kernel>("Restore");
}

}  // namespace weft::cpu

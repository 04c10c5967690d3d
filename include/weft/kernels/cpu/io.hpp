/// @file
/// CPU kernels for ops/io_ops.hpp: Save and Restore, over the checkpoint file of
/// runtime/checkpoint_file.hpp; the readers, over runtime/reader.hpp; ReadFile and WriteFile.
#pragma once

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/file.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/data_flow.hpp>
#include <weft/ops/io_ops.hpp>
#include <weft/runtime/checkpoint_file.hpp>
#include <weft/runtime/reader.hpp>
#include <weft/runtime/records.hpp>

namespace weft::cpu {

using weft::filename_tensor;
using weft::path_of;

/// The CPU kernel of Save.
struct save_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit save_kernel(const node& n) : names_(n.attr<std::vector<std::string>>("tensor_names")) {}
  void compute(kernel_context& ctx) const override {
    std::vector<std::pair<std::string, tensor>> named;
    for (int i = 1; i < ctx.num_inputs(); ++i) named.emplace_back(names_[static_cast<std::size_t>(i - 1)], ctx.input(i));
    write_checkpoint(path_of(ctx.input(0)), named);
  }
 private:
  std::vector<std::string> names_;
};

/// The CPU kernel of Restore.
struct restore_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit restore_kernel(const node& n)
      : names_(n.attr<std::vector<std::string>>("tensor_names")),
        dtypes_(n.attr<std::vector<dtype>>("dtypes")),
        shapes_(n.attr<std::vector<partial_shape>>("shapes")) {}
  /// Every output is checked before any is set: a bad file sets none.
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
 private:
  std::vector<std::string> names_;
  std::vector<dtype> dtypes_;
  std::vector<partial_shape> shapes_;
};

/// TFRecordReader, FixedLengthRecordReader, TextLineReader, WholeFileReader: make the reader on
/// first run (one already under the name must cut records the same way) and output its handle.
struct reader_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit reader_kernel(const node& n)
      : container_(n.attr<std::string>("container")),
        name_(n.attr<std::string>("shared_name").empty() ? n.name() : n.attr<std::string>("shared_name")),
        handle_(tensor::from_vector(std::vector<std::string>{container_, name_})) {
    const std::string& op = n.op();
    f_.type = op == "TFRecordReader"            ? record_format::kind::tfrecord
              : op == "FixedLengthRecordReader" ? record_format::kind::fixed_length
              : op == "TextLineReader"          ? record_format::kind::text_line
                                                : record_format::kind::whole_file;
    f_.compressed = parse_compression(n.attr<std::string>("compression_type"));
    if (f_.type == record_format::kind::fixed_length) {
      f_.header_bytes = n.attr<std::int64_t>("header_bytes");
      f_.record_bytes = n.attr<std::int64_t>("record_bytes");
      f_.footer_bytes = n.attr<std::int64_t>("footer_bytes");
      f_.hop_bytes = n.attr<std::int64_t>("hop_bytes");
    }
    if (f_.type == record_format::kind::text_line) f_.skip_header_lines = n.attr<std::int64_t>("skip_header_lines");
  }
  void compute(kernel_context& ctx) const override {
    auto r = ctx.resources().lookup_or_create<record_reader>(container_, name_, [&] { return std::make_shared<record_reader>(name_, f_); });
    const record_format& o = r->format();
    if (o.type != f_.type || o.compressed != f_.compressed || o.header_bytes != f_.header_bytes ||
        o.record_bytes != f_.record_bytes || o.footer_bytes != f_.footer_bytes || o.hop_bytes != f_.hop_bytes ||
        o.skip_header_lines != f_.skip_header_lines)
      fail(error_code::invalid_argument, "reader '", name_, "' in container '", container_,
           "' exists and cuts records another way (another reader op or other attrs under one shared_name)");
    ctx.set_output(0, handle_);
  }
 private:
  std::string container_, name_;
  tensor handle_;
  record_format f_;
};

/// ReaderRead and ReaderReadUpTo: async, as a dequeue (the file names come from a queue).
struct reader_read_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit reader_read_kernel(const node& n) : up_to_(n.op() == "ReaderReadUpTo") {}
  bool is_async() const noexcept override { return true; }
  void compute(kernel_context&) const override {}  ///< async only
  void compute_async(kernel_context& ctx, std::function<void()> done) const override {
    start_attempt(ctx, done, [&] {
      auto reader = resource_of<record_reader>(ctx, 0);
      auto files = queue_of(ctx, 1);
      std::int64_t n = 1;
      if (up_to_) {
        const tensor& k = ctx.input(2);
        if (k.rank() != 0) fail(error_code::invalid_argument, "num_records must be a scalar, got shape ", k.shape());
        n = k.scalar_value<std::int64_t>();
      }
      reader->read(files, n, up_to_, &ctx.cancellation(), [this, &ctx, done](std::exception_ptr e, record_reader::records got) {
        if (e) {
          ctx.set_error(std::move(e));
        } else if (!up_to_) {
          ctx.set_output(0, tensor::scalar(got[0].first));
          ctx.set_output(1, tensor::scalar(got[0].second));
        } else {
          const auto k = static_cast<std::int64_t>(got.size());
          std::string* keys = ctx.allocate_output(0, shape{k}).data<std::string>();
          std::string* values = ctx.allocate_output(1, shape{k}).data<std::string>();
          for (std::size_t i = 0; i < got.size(); ++i) keys[i] = std::move(got[i].first), values[i] = std::move(got[i].second);
        }
        done();
      });
    });
  }
 private:
  bool up_to_;
};

/// ReaderNumRecordsProduced, ReaderNumWorkUnitsCompleted, ReaderReset.
struct reader_state_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit reader_state_kernel(const node& n) : op_(n.op()) {}
  void compute(kernel_context& ctx) const override {
    auto r = resource_of<record_reader>(ctx, 0);
    if (op_ == "ReaderReset") return r->reset();
    const std::int64_t v = op_ == "ReaderNumRecordsProduced" ? r->records_produced() : r->work_units_completed();
    ctx.allocate_output(0, shape{}).data<std::int64_t>()[0] = v;
  }
 private:
  std::string op_;
};

/// The CPU kernel of ReadFile.
struct read_file_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit read_file_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    ctx.set_output(0, tensor::scalar(read_file(path_of(ctx.input(0)), "the file")));
  }
};

/// WriteFile: atomically (a temporary file, fsync'd, renamed over the target).
struct write_file_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit write_file_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& contents = ctx.input(1);
    if (contents.rank() != 0) fail(error_code::invalid_argument, "contents must be a string scalar, got shape ", contents.shape());
    weft::detail::write_file_atomically(path_of(ctx.input(0)), *contents.data<std::string>(), {});
  }
};

/// A template, so that including this header instantiates nothing until it is called (a
/// saver asks for it through kernel_for<ops::families::io, void, device_types::cpu>).
template <int = 0>
void register_io_kernels() {
  ops::register_io_ops();
  register_cpu_kernel<save_kernel>("Save");
  register_cpu_kernel<restore_kernel>("Restore");
  for (const char* op : {"TFRecordReader", "FixedLengthRecordReader", "TextLineReader", "WholeFileReader"})
    register_cpu_kernel<reader_kernel>(op);
  register_cpu_kernel<reader_read_kernel>("ReaderRead");
  register_cpu_kernel<reader_read_kernel>("ReaderReadUpTo");
  for (const char* op : {"ReaderNumRecordsProduced", "ReaderNumWorkUnitsCompleted", "ReaderReset"})
    register_cpu_kernel<reader_state_kernel>(op);
  register_cpu_kernel<read_file_kernel>("ReadFile");
  register_cpu_kernel<write_file_kernel>("WriteFile");
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of Save's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Save, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::save_kernel>("Save"); }
};
/// Typed code's registration of Restore's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Restore, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::restore_kernel>("Restore"); }
};
/// Typed code's registration of every io op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::io, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_io_kernels(); }
};
}  // namespace weft

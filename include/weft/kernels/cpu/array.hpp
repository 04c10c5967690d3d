/// @file
/// CPU kernels for ops/array_ops.hpp. Most are data movement and work on bytes, so one
/// instantiation serves every dtype.
#pragma once

#include <cstring>
#include <numeric>

#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/convert.hpp>
#include <weft/ops/array_ops.hpp>
#include <weft/ops/core_ops.hpp>

namespace weft::cpu {

/// The CPU kernel of Const.
struct const_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read and checked here, once.
  explicit const_kernel(const node& n) : value_(n.attr<tensor>("value")) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, value_); }
 private:
  tensor value_;
};

/// The CPU kernel of Placeholder.
struct placeholder_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit placeholder_kernel(const node&) {}
  void compute(kernel_context&) const override {
    fail(error_code::invalid_argument, "a placeholder must be fed");
  }
};

/// The CPU kernel of Identity, PlaceholderWithDefault.
struct identity_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit identity_kernel(const node&) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, ctx.input(0)); }
};

/// The CPU kernel of NoOp.
struct no_op_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit no_op_kernel(const node&) {}
  void compute(kernel_context&) const override {}
};

/// The CPU kernel of Reshape.
struct reshape_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit reshape_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    auto dims = int_values(ctx.input(1), "shape");
    if (ctx.input(1).rank() > 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(1).shape());
    int wild = -1;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1 && wild < 0) {
        wild = static_cast<int>(i);
      } else if (dims[i] < 0) {
        fail(error_code::invalid_argument, "invalid dimension ", dims[i], " in shape ", attr_value(dims));
      } else {
        known = checked_mul(known, dims[i], "the shape's element count");
      }
    }
    if (wild >= 0) {
      if (known == 0 || x.num_elements() % known != 0)
        fail(error_code::invalid_argument, "cannot reshape ", x.shape(), " (", x.num_elements(), " elements) to ",
             attr_value(dims));
      dims[static_cast<std::size_t>(wild)] = x.num_elements() / known;
    }
    ctx.set_output(0, x.reshape(shape(dims)));
  }
};

/// Copies `in` (dims `in_dims`) to a fresh row-major buffer with dims permuted by `perm`.
inline void transpose_bytes(const char* in, char* out, const std::vector<std::int64_t>& in_dims,
                            const std::vector<std::int64_t>& perm, std::size_t elem) {
  int rank = static_cast<int>(in_dims.size());
  std::vector<std::int64_t> in_strides(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[static_cast<std::size_t>(d)] = in_strides[static_cast<std::size_t>(d) + 1] * in_dims[static_cast<std::size_t>(d) + 1];
  std::vector<std::int64_t> out_dims(static_cast<std::size_t>(rank)), strides(static_cast<std::size_t>(rank));
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    out_dims[static_cast<std::size_t>(d)] = in_dims[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
    strides[static_cast<std::size_t>(d)] = in_strides[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
    n *= out_dims[static_cast<std::size_t>(d)];
  }
  if (n == 0) return;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(out + static_cast<std::size_t>(i) * elem, in + static_cast<std::size_t>(off) * elem, elem);
    for (int d = rank - 1; d >= 0; --d) {
      auto k = static_cast<std::size_t>(d);
      off += strides[k];
      if (++idx[k] < out_dims[k]) break;
      off -= idx[k] * strides[k];
      idx[k] = 0;
    }
  }
}

/// The CPU kernel of Transpose.
struct transpose_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit transpose_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    auto perm = int_values(ctx.input(1), "perm");
    if (static_cast<int>(perm.size()) != x.rank())
      fail(error_code::invalid_argument, "perm ", attr_value(perm), " has ", perm.size(), " entries for rank ", x.rank());
    std::vector<bool> seen(perm.size());
    std::vector<std::int64_t> dims;
    for (auto p : perm) {
      if (p < 0 || p >= x.rank() || seen[static_cast<std::size_t>(p)])
        fail(error_code::invalid_argument, "perm ", attr_value(perm), " is not a permutation");
      seen[static_cast<std::size_t>(p)] = true;
      dims.push_back(x.shape()[static_cast<int>(p)]);
    }
    tensor& y = ctx.allocate_output(0, shape(dims));
    transpose_bytes(static_cast<const char*>(x.raw_data()), static_cast<char*>(y.raw_data()), x.shape().dims(), perm,
                    size_of(x.dtype()));
  }
};

/// The CPU kernel of ConcatV2.
struct concat_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit concat_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    int n = ctx.num_inputs() - 1;
    const tensor& first = ctx.input(0);
    if (first.rank() == 0) fail(error_code::invalid_argument, "cannot concatenate scalars");
    int axis = canonical_axis(scalar_int(ctx.input(n), "axis"), first.rank());
    auto dims = first.shape().dims();
    dims[static_cast<std::size_t>(axis)] = 0;
    for (int i = 0; i < n; ++i) {
      const tensor& t = ctx.input(i);
      bool ok = t.rank() == first.rank();
      for (int d = 0; ok && d < t.rank(); ++d) ok = d == axis || t.shape()[d] == first.shape()[d];
      if (!ok)
        fail(error_code::invalid_argument, "input ", i, " has shape ", t.shape(), ", which does not match ",
             first.shape(), " outside axis ", axis);
      dims[static_cast<std::size_t>(axis)] += t.shape()[axis];  // within: dims of inputs that exist
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    std::size_t elem = size_of(first.dtype());
    std::int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= dims[static_cast<std::size_t>(d)];
    char* dst = static_cast<char*>(out.raw_data());
    for (std::int64_t o = 0; o < outer; ++o)
      for (int i = 0; i < n; ++i) {
        const tensor& t = ctx.input(i);
        std::size_t chunk = static_cast<std::size_t>(outer ? t.num_elements() / outer : 0) * elem;
        copy_element_bytes(dst, static_cast<const char*>(t.raw_data()) + static_cast<std::size_t>(o) * chunk, chunk, t.dtype());
        dst += chunk;
      }
  }
};

/// The CPU kernel of Split.
struct split_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit split_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(1);
    int k = ctx.num_outputs();
    if (x.rank() == 0) fail(error_code::invalid_argument, "cannot split a scalar");
    int axis = canonical_axis(scalar_int(ctx.input(0), "axis"), x.rank());
    std::int64_t size = x.shape()[axis];
    if (size % k != 0)
      fail(error_code::invalid_argument, "dimension ", axis, " of size ", size, " does not split into ", k, " parts");
    auto dims = x.shape().dims();
    dims[static_cast<std::size_t>(axis)] = size / k;
    std::int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= dims[static_cast<std::size_t>(d)];
    std::size_t elem = size_of(x.dtype());
    shape part(dims);
    std::size_t chunk = static_cast<std::size_t>(outer ? part.num_elements() / outer : 0) * elem;
    for (int i = 0; i < k; ++i) {
      tensor& out = ctx.allocate_output(i, part);
      for (std::int64_t o = 0; o < outer; ++o)
        copy_element_bytes(static_cast<char*>(out.raw_data()) + static_cast<std::size_t>(o) * chunk,
                           static_cast<const char*>(x.raw_data()) + (static_cast<std::size_t>(o) * static_cast<std::size_t>(k) + static_cast<std::size_t>(i)) * chunk,
                           chunk, x.dtype());
    }
  }
};

/// Calls f(offset in the whole, offset in the box, elements) for each row of the box
/// [begin, begin + size) of a row-major tensor of dims `whole` (the box dense, dims `size`).
template <class F>
void for_each_box_row(const shape& whole, const std::vector<std::int64_t>& begin, const shape& size, F&& f) {
  const int rank = whole.rank();
  const std::int64_t n = size.num_elements();
  if (n == 0) return;
  if (rank == 0) return f(0, 0, 1);
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) strides[static_cast<std::size_t>(d)] = strides[static_cast<std::size_t>(d) + 1] * whole[d + 1];
  const std::int64_t row = size[rank - 1];
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
  for (std::int64_t r = 0; r < n / row; ++r) {
    std::int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += (begin[static_cast<std::size_t>(d)] + idx[static_cast<std::size_t>(d)]) * strides[static_cast<std::size_t>(d)];
    f(off, r * row, row);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < size[d]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
}
/// Copies the box [begin, begin + box.shape) of `whole` into `box` (Slice).
inline void copy_from_box(const tensor& whole, const std::vector<std::int64_t>& begin, tensor& box) {
  const std::size_t elem = size_of(whole.dtype());
  const char* in = static_cast<const char*>(whole.raw_data());
  char* out = static_cast<char*>(box.raw_data());
  for_each_box_row(whole.shape(), begin, box.shape(), [&](std::int64_t w, std::int64_t b, std::int64_t n) {
    copy_element_bytes(out + static_cast<std::size_t>(b) * elem, in + static_cast<std::size_t>(w) * elem, static_cast<std::size_t>(n) * elem,
                       whole.dtype());
  });
}
/// Copies `box` into the box [begin, begin + box.shape) of `whole` (Pad).
inline void copy_into_box(const tensor& box, const std::vector<std::int64_t>& begin, tensor& whole) {
  const std::size_t elem = size_of(whole.dtype());
  const char* in = static_cast<const char*>(box.raw_data());
  char* out = static_cast<char*>(whole.raw_data());
  for_each_box_row(whole.shape(), begin, box.shape(), [&](std::int64_t w, std::int64_t b, std::int64_t n) {
    std::memcpy(out + static_cast<std::size_t>(w) * elem, in + static_cast<std::size_t>(b) * elem, static_cast<std::size_t>(n) * elem);
  });
}

/// The CPU kernel of Slice.
struct slice_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit slice_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    auto begin = int_values(ctx.input(1), "begin");
    auto size = int_values(ctx.input(2), "size");
    if (static_cast<int>(begin.size()) != x.rank() || static_cast<int>(size.size()) != x.rank())
      fail(error_code::invalid_argument, "begin and size must have ", x.rank(), " entries, got ", begin.size(), " and ",
           size.size());
    for (int d = 0; d < x.rank(); ++d) {
      const auto b = begin[static_cast<std::size_t>(d)];
      auto& s = size[static_cast<std::size_t>(d)];
      // b + s could overflow: compare s with what remains after b.
      if (b < 0 || b > x.shape()[d] || s < -1 || s > x.shape()[d] - b)
        fail(error_code::out_of_range, "slice of size ", s, " from ", b, " is out of range for dim ", d, " of size ",
             x.shape()[d]);
      if (s == -1) s = x.shape()[d] - b;
    }
    tensor& out = ctx.allocate_output(0, shape(size));
    copy_from_box(x, begin, out);
  }
};

/// The CPU kernel of Pad.
struct pad_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit pad_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    auto pads = int_values(ctx.input(1), "paddings");
    if (ctx.input(1).shape() != shape{x.rank(), 2})
      fail(error_code::invalid_argument, "paddings must have shape [", x.rank(), ",2], got ", ctx.input(1).shape());
    std::vector<std::int64_t> dims, begin;
    for (int d = 0; d < x.rank(); ++d) {
      auto before = pads[2 * static_cast<std::size_t>(d)], after = pads[2 * static_cast<std::size_t>(d) + 1];
      if (before < 0 || after < 0) fail(error_code::invalid_argument, "negative padding at dim ", d);
      dims.push_back(checked_add(checked_add(x.shape()[d], before, "a padded dim"), after, "a padded dim"));
      begin.push_back(before);
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    if (out.bytes()) std::memset(out.raw_data(), 0, out.bytes());  // all-zero bytes are zero for every dtype
    copy_into_box(x, begin, out);
  }
};

/// The CPU kernel of Tile.
struct tile_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit tile_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    auto m = int_values(ctx.input(1), "multiples");
    if (static_cast<int>(m.size()) != x.rank())
      fail(error_code::invalid_argument, "multiples has ", m.size(), " entries for rank ", x.rank());
    std::vector<std::int64_t> dims;
    for (int d = 0; d < x.rank(); ++d) {
      if (m[static_cast<std::size_t>(d)] < 0) fail(error_code::invalid_argument, "negative multiple at dim ", d);
      dims.push_back(checked_mul(x.shape()[d], m[static_cast<std::size_t>(d)], "a tiled dim"));
    }
    tensor& out = ctx.allocate_output(0, shape(dims));
    std::size_t elem = size_of(x.dtype());
    std::int64_t n = out.num_elements();
    int rank = x.rank();
    std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
    const char* in = static_cast<const char*>(x.raw_data());
    char* o = static_cast<char*>(out.raw_data());
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t off = 0;
      for (int d = 0; d < rank; ++d) off = off * x.shape()[d] + idx[static_cast<std::size_t>(d)] % x.shape()[d];
      copy_element_bytes(o + static_cast<std::size_t>(i) * elem, in + static_cast<std::size_t>(off) * elem, elem, x.dtype());
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < dims[static_cast<std::size_t>(d)]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
};

/// The CPU kernel of GatherV2.
struct gather_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gather_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& p = ctx.input(0);
    const tensor& indices = ctx.input(1);
    if (p.rank() == 0) fail(error_code::invalid_argument, "params must have rank at least 1");
    int axis = canonical_axis(scalar_int(ctx.input(2), "axis"), p.rank());
    auto idx = int_values(indices, "indices");
    std::int64_t limit = p.shape()[axis];
    for (std::size_t i = 0; i < idx.size(); ++i)
      if (idx[i] < 0 || idx[i] >= limit)
        fail(error_code::out_of_range, "indices[", i, "] = ", idx[i], " is not in [0, ", limit, ")");
    std::vector<std::int64_t> dims(p.shape().dims().begin(), p.shape().dims().begin() + axis);
    dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), p.shape().dims().begin() + axis + 1, p.shape().dims().end());
    tensor& out = ctx.allocate_output(0, shape(dims));
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= p.shape()[d];
    for (int d = axis + 1; d < p.rank(); ++d) inner *= p.shape()[d];
    std::size_t chunk = static_cast<std::size_t>(inner) * size_of(p.dtype());  // within: a slice of params
    const char* in = static_cast<const char*>(p.raw_data());
    char* o = static_cast<char*>(out.raw_data());
    if (chunk == 0) return;
    for (std::int64_t a = 0; a < outer; ++a)
      for (std::size_t i = 0; i < idx.size(); ++i, o += chunk)
        copy_element_bytes(o, in + (static_cast<std::size_t>(a * limit + idx[i])) * chunk, chunk, p.dtype());
  }
};

/// GatherNd(params, indices): the slices the index tuples address, one after the other.
struct gather_nd_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit gather_nd_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& p = ctx.input(0);
    const nd_rows r = nd_rows_of(ctx.input(1), p.shape());
    tensor& out = ctx.allocate_output(0, shape(r.slices_dims));
    const std::size_t chunk = static_cast<std::size_t>(r.slice) * size_of(p.dtype());  // within: a slice of params
    if (chunk == 0) return;
    const char* in = static_cast<const char*>(p.raw_data());
    char* o = static_cast<char*>(out.raw_data());
    for (std::size_t j = 0; j < r.rows.size(); ++j, o += chunk) std::memcpy(o, in + static_cast<std::size_t>(r.rows[j]) * chunk, chunk);
  }
};

/// TensorScatterUpdate(tensor, indices, updates): tensor, written in place when no one
/// else holds it (kernel_context::forward_input_or_copy), with the slices replaced.
struct tensor_scatter_update_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit tensor_scatter_update_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const shape s = ctx.input(0).shape();
    const nd_rows r = nd_rows_of(ctx.input(1), s);
    check_updates(r, ctx.input(2), ctx.input(1), s);
    const std::size_t chunk = static_cast<std::size_t>(r.slice) * size_of(ctx.input(2).dtype());  // within: a slice of the tensor
    const char* u = static_cast<const char*>(ctx.input(2).raw_data());
    char* o = static_cast<char*>(ctx.forward_input_or_copy(0, 0).raw_data());
    if (chunk == 0) return;
    for (std::size_t j = 0; j < r.rows.size(); ++j, u += chunk) std::memcpy(o + static_cast<std::size_t>(r.rows[j]) * chunk, u, chunk);
  }
};

/// The CPU kernel of OneHot.
struct one_hot_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit one_hot_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& indices = ctx.input(0);
    std::int64_t depth = scalar_int(ctx.input(1), "depth");
    if (depth < 0) fail(error_code::invalid_argument, "depth must be non-negative, got ", depth);
    const tensor& on = ctx.input(2);
    const tensor& off = ctx.input(3);
    if (on.num_elements() != 1 || off.num_elements() != 1)
      fail(error_code::invalid_argument, "on_value and off_value must be scalars");
    auto axis = ctx.attr<std::int64_t>("axis");
    if (axis < -1 || axis > indices.rank()) fail(error_code::invalid_argument, "axis ", axis, " out of range");
    std::vector<std::int64_t> idx;
    if (indices.dtype() == dtype::uint8)
      for (auto v : indices.flat<std::uint8_t>()) idx.push_back(v);
    else
      idx = int_values(indices, "indices");
    auto dims = indices.shape().dims();
    auto pos = axis == -1 ? dims.size() : static_cast<std::size_t>(axis);
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(pos), depth);
    tensor& out = ctx.allocate_output(0, shape(dims));
    std::int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < pos; ++d) outer *= dims[d];
    for (std::size_t d = pos + 1; d < dims.size(); ++d) inner *= dims[d];
    std::size_t elem = size_of(out.dtype());
    char* o = static_cast<char*>(out.raw_data());
    for (std::int64_t a = 0; a < outer; ++a)
      for (std::int64_t k = 0; k < depth; ++k)
        for (std::int64_t b = 0; b < inner; ++b, o += elem) {
          std::int64_t i = idx[static_cast<std::size_t>(a * inner + b)];
          std::memcpy(o, (i == k ? on : off).raw_data(), elem);  // out-of-range indices give an all-off row
        }
  }
};

/// v as a tensor of Int (int32 or int64) of shape s.
template <class Int>
tensor int_tensor(const std::vector<std::int64_t>& v, shape s) {
  std::vector<Int> out(v.begin(), v.end());
  return tensor::from_vector(out, std::move(s));
}

/// The CPU kernel of Shape.
struct shape_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit shape_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const auto& dims = ctx.input(0).shape().dims();
    shape s{static_cast<std::int64_t>(dims.size())};
    ctx.set_output(0, ctx.node().output_dtype(0) == dtype::int32 ? int_tensor<std::int32_t>(dims, s)
                                                                  : int_tensor<std::int64_t>(dims, s));
  }
};

/// The CPU kernel of Rank.
struct rank_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit rank_kernel(const node&) {}
  void compute(kernel_context& ctx) const override { ctx.set_output(0, tensor::scalar<std::int32_t>(ctx.input(0).rank())); }
};

/// The CPU kernel of Size.
struct size_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit size_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    auto n = ctx.input(0).num_elements();
    ctx.set_output(0, ctx.node().output_dtype(0) == dtype::int32 ? tensor::scalar(static_cast<std::int32_t>(n))
                                                                  : tensor::scalar(static_cast<std::int64_t>(n)));
  }
};

/// Every element of out set to the element at `value` (out's dtype, copied bytewise).
inline void fill_bytes(tensor& out, const void* value) {
  std::size_t elem = size_of(out.dtype());
  char* o = static_cast<char*>(out.raw_data());
  for (std::int64_t i = 0, n = out.num_elements(); i < n; ++i) std::memcpy(o + static_cast<std::size_t>(i) * elem, value, elem);
}

/// The CPU kernel of Fill.
struct fill_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit fill_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "dims must be a vector, got shape ", ctx.input(0).shape());
    const tensor& value = ctx.input(1);
    if (value.rank() != 0) fail(error_code::invalid_argument, "value must be a scalar, got shape ", value.shape());
    tensor& out = ctx.allocate_output(0, shape_from_dims(int_values(ctx.input(0), "dims"), "dims"));
    fill_bytes(out, value.raw_data());
  }
};

/// The CPU kernel of ZerosLike.
struct zeros_like_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit zeros_like_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    tensor& out = ctx.allocate_output(0, ctx.input(0).shape());
    if (out.bytes()) std::memset(out.raw_data(), 0, out.bytes());
  }
};

/// A template, so that including this header does not instantiate the conversion table.
template <int = 0>
struct ones_like_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit ones_like_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    tensor& out = ctx.allocate_output(0, ctx.input(0).shape());
    const double one = 1;
    alignas(16) unsigned char value[16];  // one element of any dtype
    converter(dtype::float64, out.dtype())(&one, value, 0, 1);
    fill_bytes(out, value);
  }
};

/// x's dims with a 1 inserted at `axis` (in [-rank - 1, rank]: ExpandDims' dim, Pack's
/// axis), or an error naming `what`.
inline std::vector<std::int64_t> dims_with_new_axis(const shape& x, std::int64_t axis, const char* what) {
  const int rank = x.rank();
  if (rank >= max_rank) fail(error_code::invalid_argument, "the input has ", rank, " dims: one more is more than ", max_rank);
  if (axis < -rank - 1 || axis > rank)
    fail(error_code::invalid_argument, what, " ", axis, " is out of range [", -rank - 1, ", ", rank, "] for an input of rank ",
         rank);
  auto dims = x.dims();
  dims.insert(dims.begin() + (axis < 0 ? axis + rank + 1 : axis), 1);
  return dims;
}

/// The CPU kernel of ExpandDims (a view of the input, as Reshape's).
struct expand_dims_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit expand_dims_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    ctx.set_output(0, x.reshape(shape(dims_with_new_axis(x.shape(), scalar_int(ctx.input(1), "dim"), "dim"))));
  }
};

/// x's dims without those named in `axes` (each of size 1), or, none named, without every
/// dim of size 1 (Squeeze); an error naming a dim that is not 1 or out of range.
inline std::vector<std::int64_t> squeezed_dims(const shape& x, const std::vector<std::int64_t>& axes) {
  const int rank = x.rank();
  std::vector<bool> named(static_cast<std::size_t>(rank));
  for (auto a : axes) named[static_cast<std::size_t>(canonical_axis(a, rank, "squeeze_dims"))] = true;
  std::vector<std::int64_t> out;
  for (int d = 0; d < rank; ++d) {
    if (axes.empty() ? x[d] != 1 : !named[static_cast<std::size_t>(d)]) out.push_back(x[d]);
    else if (x[d] != 1) fail(error_code::invalid_argument, "cannot squeeze dim ", d, " of shape ", x, ": its size is ", x[d], ", not 1");
  }
  return out;
}

/// The CPU kernel of Squeeze (a view of the input).
struct squeeze_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit squeeze_kernel(const node& n) : axes_(n.attr<std::vector<std::int64_t>>("squeeze_dims")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    ctx.set_output(0, x.reshape(shape(squeezed_dims(x.shape(), axes_))));
  }
 private:
  std::vector<std::int64_t> axes_;
};

/// Pack's output shape: the node's N inputs (checked to share one shape) stacked at `axis`.
inline shape packed_shape(const kernel_context& ctx, std::int64_t axis) {
  const int n = ctx.num_inputs();
  const tensor& first = ctx.input(0);
  for (int i = 1; i < n; ++i)
    if (ctx.input(i).shape() != first.shape())
      fail(error_code::invalid_argument, "value ", i, " has shape ", ctx.input(i).shape(), ", value 0 ", first.shape(),
           ": the values to pack must have one shape");
  auto dims = dims_with_new_axis(first.shape(), axis, "axis");
  dims[static_cast<std::size_t>(axis < 0 ? axis + first.rank() + 1 : axis)] = n;
  return shape(dims);
}
/// Pack's values (in host memory) into `out` (packed_shape's): each value's chunk of every
/// outer index, in turn (ConcatV2 of the values seen with a dim of 1 at axis).
inline void pack_into(const kernel_context& ctx, std::int64_t axis, tensor& out) {
  const tensor& first = ctx.input(0);
  const auto at = static_cast<int>(axis < 0 ? axis + first.rank() + 1 : axis);
  std::int64_t outer = 1;
  for (int d = 0; d < at; ++d) outer *= out.shape()[d];
  const std::size_t chunk = static_cast<std::size_t>(outer ? first.num_elements() / outer : 0) * size_of(first.dtype());  // within: a value's bytes
  char* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t o = 0; o < outer; ++o)
    for (int i = 0; i < ctx.num_inputs(); ++i, dst += chunk)
      copy_element_bytes(dst, static_cast<const char*>(ctx.input(i).raw_data()) + static_cast<std::size_t>(o) * chunk, chunk,
                         first.dtype());
}

/// The CPU kernel of Pack.
struct pack_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit pack_kernel(const node& n) : axis_(n.attr<std::int64_t>("axis")) {}
  void compute(kernel_context& ctx) const override { pack_into(ctx, axis_, ctx.allocate_output(0, packed_shape(ctx, axis_))); }
 private:
  std::int64_t axis_;
};

/// Unpack's axis of x (canonical) and the shape of each output, after checking that the
/// axis' dim is `num`.
inline std::pair<int, shape> unpacked_part(const tensor& x, std::int64_t axis, int num) {
  if (x.rank() == 0) fail(error_code::invalid_argument, "cannot unpack a scalar");
  const int a = canonical_axis(axis, x.rank());
  if (x.shape()[a] != num)
    fail(error_code::invalid_argument, "dimension ", a, " of shape ", x.shape(), " has size ", x.shape()[a], ", not num = ", num);
  auto dims = x.shape().dims();
  dims.erase(dims.begin() + a);
  return {a, shape(dims)};
}
/// Slice i of x (in host memory) along axis `a` into `out` (of unpacked_part's shape).
inline void unpack_into(const tensor& x, int a, int i, tensor& out) {
  std::int64_t outer = 1;
  for (int d = 0; d < a; ++d) outer *= x.shape()[d];
  const auto num = static_cast<std::size_t>(x.shape()[a]);
  const std::size_t chunk = static_cast<std::size_t>(outer ? out.num_elements() / outer : 0) * size_of(x.dtype());  // within: an output's bytes
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t o = 0; o < outer; ++o)
    copy_element_bytes(dst + static_cast<std::size_t>(o) * chunk,
                       src + (static_cast<std::size_t>(o) * num + static_cast<std::size_t>(i)) * chunk, chunk, x.dtype());
}

/// The CPU kernel of Unpack: output i gets slice i along the axis of every outer index.
struct unpack_kernel final : op_kernel {
  /// The kernel of node n: its attrs are read here, once.
  explicit unpack_kernel(const node& n) : axis_(n.attr<std::int64_t>("axis")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const auto [a, part] = unpacked_part(x, axis_, ctx.num_outputs());
    for (int i = 0; i < ctx.num_outputs(); ++i) unpack_into(x, a, i, ctx.allocate_output(i, part));
  }
 private:
  std::int64_t axis_;
};

/// Which dims of a tensor of rank `rank` ReverseV2's `axis` (a vector) reverses, or an error
/// naming an axis out of range or named twice.
inline std::vector<bool> reversed_dims(const tensor& axis, int rank) {
  if (axis.rank() != 1) fail(error_code::invalid_argument, "axis must be a vector, got shape ", axis.shape());
  const auto axes = int_values(axis, "axis");
  std::vector<bool> flip(static_cast<std::size_t>(rank));
  for (auto a : axes) {
    const auto d = static_cast<std::size_t>(canonical_axis(a, rank));
    if (flip[d]) fail(error_code::invalid_argument, "axis ", d, " is named twice in ", attr_value(axes));
    flip[d] = true;
  }
  return flip;
}

/// The CPU kernel of ReverseV2: the trailing dims after the last reversed one move as
/// contiguous blocks; the input itself when no reversed dim has more than one element.
struct reverse_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit reverse_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const std::vector<bool> flip = reversed_dims(ctx.input(1), x.rank());
    int last = -1;
    for (int d = 0; d < x.rank(); ++d)
      if (flip[static_cast<std::size_t>(d)] && x.shape()[d] > 1) last = d;
    if (last < 0) return ctx.set_output(0, x);  // nothing moves
    tensor& y = ctx.allocate_output(0, x.shape());
    std::int64_t inner = 1, blocks = 1;
    for (int d = last + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    for (int d = 0; d <= last; ++d) blocks *= x.shape()[d];
    const std::size_t bytes = static_cast<std::size_t>(inner) * size_of(x.dtype());  // within: x's bytes
    const char* in = static_cast<const char*>(x.raw_data());
    char* out = static_cast<char*>(y.raw_data());
    std::vector<std::int64_t> idx(static_cast<std::size_t>(last) + 1, 0);
    for (std::int64_t b = 0; b < blocks; ++b) {
      std::int64_t from = 0;
      for (int d = 0; d <= last; ++d) {
        const auto k = static_cast<std::size_t>(d);
        from = from * x.shape()[d] + (flip[k] ? x.shape()[d] - 1 - idx[k] : idx[k]);
      }
      copy_element_bytes(out + static_cast<std::size_t>(b) * bytes, in + static_cast<std::size_t>(from) * bytes, bytes, x.dtype());
      for (int d = last; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < x.shape()[d]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
};

/// The plan of a StridedSlice over an input of dims `dims` from its spec (begin, end and
/// strides: int vectors of one length) and masks, or an error saying what is wrong.
inline ops::strided_slice_plan strided_slice_plan_for(const std::vector<std::int64_t>& dims, const tensor& begin, const tensor& end,
                                                      const tensor& strides, const ops::strided_slice_masks& masks) {
  if (begin.rank() != 1 || end.rank() != 1 || strides.rank() != 1)
    fail(error_code::invalid_argument, "begin, end and strides must be vectors, got shapes ", begin.shape(), ", ", end.shape(),
         " and ", strides.shape());
  ops::strided_slice_plan p =
      ops::plan_strided_slice(dims, int_values(begin, "begin"), int_values(end, "end"), int_values(strides, "strides"), masks);
  if (!p.error.empty()) fail(error_code::invalid_argument, p.error);
  return p;
}

/// Copies the elements a StridedSlice plan takes of `whole` (a tensor of that shape) to the
/// dense `slice` (Scatter false), or back from `slice` into `whole` (Scatter true: the
/// gradient); runs of the last dim move at once where its stride is 1.
template <bool Scatter>
void strided_copy(const ops::strided_slice_plan& p, const tensor& from, tensor& to) {
  const tensor& whole = Scatter ? to : from;
  const int rank = whole.rank();
  std::int64_t n = 1;
  for (auto c : p.count) n *= c;  // within: the slice's elements, at most the input's
  if (n == 0) return;
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d)
    strides[static_cast<std::size_t>(d)] = strides[static_cast<std::size_t>(d) + 1] * whole.shape()[d + 1];
  const bool runs = rank > 0 && p.stride[static_cast<std::size_t>(rank) - 1] == 1;
  const std::int64_t run = runs ? p.count[static_cast<std::size_t>(rank) - 1] : 1;
  const std::size_t elem = size_of(whole.dtype());
  const char* src = static_cast<const char*>(from.raw_data());
  char* dst = static_cast<char*>(to.raw_data());
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
  for (std::int64_t k = 0; k < n; k += run) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) at += (p.begin[d] + idx[d] * p.stride[d]) * strides[d];
    const std::size_t bytes = static_cast<std::size_t>(run) * elem;  // within: a run of the input's elements
    if constexpr (Scatter)
      copy_element_bytes(dst + static_cast<std::size_t>(at) * elem, src + static_cast<std::size_t>(k) * elem, bytes, whole.dtype());
    else
      copy_element_bytes(dst + static_cast<std::size_t>(k) * elem, src + static_cast<std::size_t>(at) * elem, bytes, whole.dtype());
    for (int d = rank - (runs ? 2 : 1); d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < p.count[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
}

/// The CPU kernel of StridedSlice: the input itself (reshaped) where the slice takes all of
/// it in order, else a copy of what it takes.
struct strided_slice_kernel final : op_kernel {
  /// The kernel of node n: its masks are read here, once.
  explicit strided_slice_kernel(const node& n) : masks_(ops::strided_slice_masks_of(n)) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const auto p = strided_slice_plan_for(x.shape().dims(), ctx.input(1), ctx.input(2), ctx.input(3), masks_);
    if (p.identity) return ctx.set_output(0, x.reshape(shape(p.dims)));
    strided_copy<false>(p, x, ctx.allocate_output(0, shape(p.dims)));
  }
 private:
  ops::strided_slice_masks masks_;
};

/// The CPU kernel of StridedSliceGrad: zeros of the shape, dy written where the slice was taken.
struct strided_slice_grad_kernel final : op_kernel {
  /// The kernel of node n: its masks are read here, once.
  explicit strided_slice_grad_kernel(const node& n) : masks_(ops::strided_slice_masks_of(n)) {}
  void compute(kernel_context& ctx) const override {
    if (ctx.input(0).rank() != 1) fail(error_code::invalid_argument, "shape must be a vector, got shape ", ctx.input(0).shape());
    const auto dims = int_values(ctx.input(0), "shape");
    const shape whole = shape_from_dims(dims, "shape");
    const auto p = strided_slice_plan_for(dims, ctx.input(1), ctx.input(2), ctx.input(3), masks_);
    const tensor& dy = ctx.input(4);
    if (dy.shape() != shape(p.dims))
      fail(error_code::invalid_argument, "dy has shape ", dy.shape(), " where the slice has ", shape(p.dims));
    tensor& out = ctx.allocate_output(0, whole);
    if (out.bytes()) std::memset(out.raw_data(), 0, out.bytes());  // all-zero bytes are zero for every dtype it takes
    strided_copy<true>(p, dy, out);
  }
 private:
  ops::strided_slice_masks masks_;
};

/// SplitV's axis of x (canonical) and its parts' sizes, from the node's inputs.
inline std::pair<int, std::vector<std::int64_t>> split_v_parts(const tensor& x, const tensor& sizes, const tensor& axis, int parts) {
  if (x.rank() == 0) fail(error_code::invalid_argument, "cannot split a scalar");
  if (sizes.rank() != 1) fail(error_code::invalid_argument, "size_splits must be a vector, got shape ", sizes.shape());
  const int a = canonical_axis(scalar_int(axis, "axis"), x.rank());
  ops::split_sizes r = ops::split_sizes_of(int_values(sizes, "size_splits"), parts, x.shape()[a]);
  if (!r.error.empty()) fail(error_code::invalid_argument, r.error);
  return {a, std::move(r.sizes)};
}

/// The CPU kernel of SplitV: each part a box of x.
struct split_v_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit split_v_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const auto [a, sizes] = split_v_parts(x, ctx.input(1), ctx.input(2), ctx.num_outputs());
    std::vector<std::int64_t> begin(static_cast<std::size_t>(x.rank()), 0), dims = x.shape().dims();
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      dims[static_cast<std::size_t>(a)] = sizes[static_cast<std::size_t>(i)];
      copy_from_box(x, begin, ctx.allocate_output(i, shape(dims)));
      begin[static_cast<std::size_t>(a)] += sizes[static_cast<std::size_t>(i)];
    }
  }
};

/// The CPU kernel of Snapshot: a copy of the input (a value that a later assignment to the
/// variable it was read from cannot change).
struct snapshot_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit snapshot_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, x.shape());
    copy_element_bytes(y.raw_data(), x.raw_data(), x.bytes(), x.dtype());
  }
};

/// The kernel of EnsureShape on any device: the input itself, once its shape is checked
/// against the node's.
struct ensure_shape_kernel final : op_kernel {
  /// The kernel of node n: its shape is read here, once.
  explicit ensure_shape_kernel(const node& n) : want_(n.attr<partial_shape>("shape")) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    if (!want_.accepts(x.shape()))
      fail(error_code::invalid_argument, "shape of tensor ", x.shape(), " is not compatible with expected shape ", want_);
    ctx.set_output(0, x);
  }
 private:
  partial_shape want_;
};

/// The CPU kernel of Where for dtype T: the coordinates of the elements that are true (not
/// zero; a complex number not 0 + 0i; NaN counts as true, as in TensorFlow) in row-major
/// order, as int64 rows of rank entries.
template <class T>
struct where_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit where_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    const tensor& x = ctx.input(0);
    const T* p = x.data<T>();
    const std::int64_t n = x.num_elements();
    std::int64_t count = 0;
    for (std::int64_t i = 0; i < n; ++i) count += p[i] != T(0) ? 1 : 0;
    const int rank = x.rank();
    tensor& out = ctx.allocate_output(0, shape{count, rank});
    std::int64_t* o = out.data<std::int64_t>();
    std::vector<std::int64_t> idx(static_cast<std::size_t>(rank), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      if (p[i] != T(0)) o = std::copy(idx.begin(), idx.end(), o);
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < x.shape()[d]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
};

/// Range's values for dtype T into `out` (of range_size_of's count): element i is start +
/// i delta (integers modulo 2^64 before the cast back, which lands in [start, limit);
/// floating point computed in double and rounded once, where TensorFlow's CPU kernel adds
/// delta i times).
template <class T>
void range_into(const tensor& start_value, const tensor& delta_value, tensor& out) {
  const T start = start_value.data<T>()[0], delta = delta_value.data<T>()[0];
  T* y = out.data<T>();
  for (std::int64_t i = 0; i < out.num_elements(); ++i) {
    if constexpr (std::is_integral_v<T>)
      y[i] = static_cast<T>(static_cast<std::uint64_t>(start) + static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(delta));
    else
      y[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(delta));
  }
}
/// Range's element count for the node's inputs, or an error with the reason there is none.
inline std::int64_t range_count_of(const kernel_context& ctx) {
  const ops::range_count r = ops::range_size_of(ctx.input(0), ctx.input(1), ctx.input(2));
  if (!r.error.empty()) fail(error_code::invalid_argument, r.error);
  return r.size;
}

/// The CPU kernel of Range for dtype T.
template <class T>
struct range_kernel final : op_kernel {
  /// The kernel of a node (it reads no attrs).
  explicit range_kernel(const node&) {}
  void compute(kernel_context& ctx) const override {
    range_into<T>(ctx.input(0), ctx.input(2), ctx.allocate_output(0, shape{range_count_of(ctx)}));
  }
};

/// The kernels nearly every graph needs (constants, feeds, Identity, NoOp), for programs
/// that register only the kernels they use. Registering twice is harmless (the first stays).
template <int = 0>
void register_core_kernels() {
  ops::register_core_ops();
  register_cpu_kernel<const_kernel>("Const");
  register_cpu_kernel<placeholder_kernel>("Placeholder");
  register_cpu_kernel<identity_kernel>("Identity");
  register_cpu_kernel<identity_kernel>("PlaceholderWithDefault");  // when not fed: its default, passed through
  register_cpu_kernel<no_op_kernel>("NoOp");
}

/// A template, so that including this header instantiates nothing until it is called.
template <int = 0>
void register_array_kernels() {
  ops::register_array_ops();
  register_core_kernels();
  register_cpu_kernel<reshape_kernel>("Reshape");
  register_cpu_kernel<transpose_kernel>("Transpose");
  register_cpu_kernel<concat_kernel>("ConcatV2");
  register_cpu_kernel<split_kernel>("Split");
  register_cpu_kernel<slice_kernel>("Slice");
  register_cpu_kernel<pad_kernel>("Pad");
  register_cpu_kernel<tile_kernel>("Tile");
  register_cpu_kernel<gather_kernel>("GatherV2");
  register_cpu_kernel<one_hot_kernel>("OneHot");
  register_cpu_kernel<gather_nd_kernel>("GatherNd");
  register_cpu_kernel<tensor_scatter_update_kernel>("TensorScatterUpdate");
  register_cpu_kernel<shape_kernel>("Shape");
  register_cpu_kernel<rank_kernel>("Rank");
  register_cpu_kernel<size_kernel>("Size");
  register_cpu_kernel<fill_kernel>("Fill");
  register_cpu_kernel<zeros_like_kernel>("ZerosLike");
  register_cpu_kernel<ones_like_kernel<>>("OnesLike");
  register_cpu_kernel<expand_dims_kernel>("ExpandDims");
  register_cpu_kernel<squeeze_kernel>("Squeeze");
  register_cpu_kernel<pack_kernel>("Pack");
  register_cpu_kernel<unpack_kernel>("Unpack");
  register_cpu_kernel<reverse_kernel>("ReverseV2");
  register_cpu_kernel<strided_slice_kernel>("StridedSlice");
  register_cpu_kernel<strided_slice_grad_kernel>("StridedSliceGrad");
  register_cpu_kernel<split_v_kernel>("SplitV");
  register_cpu_kernel<identity_kernel>("StopGradient");
  register_cpu_kernel<identity_kernel>("PreventGradient");
  register_cpu_kernel<snapshot_kernel>("Snapshot");
  register_cpu_kernel<ensure_shape_kernel>("EnsureShape");
  register_for<where_kernel>("Where", "T", type_list<bool, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                                                  std::uint16_t, std::uint32_t, std::uint64_t, half, bfloat16, float, double,
                                                  complex64, complex128>{});
  register_for<range_kernel>("Range", "Tidx", type_list<std::int32_t, std::int64_t, float, double>{});
}

}  // namespace weft::cpu

/// The kernels typed code asks for (framework/kernel_for.hpp), by op type.
namespace weft {
/// Typed code's registration of Const's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Const, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::const_kernel>("Const"); }
};
/// Typed code's registration of Placeholder's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Placeholder, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::placeholder_kernel>("Placeholder"); }
};
/// Typed code's registration of Identity's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Identity, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::identity_kernel>("Identity"); }
};
/// Typed code's registration of PlaceholderWithDefault's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::PlaceholderWithDefault, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::identity_kernel>("PlaceholderWithDefault"); }
};
/// Typed code's registration of NoOp's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::NoOp, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::no_op_kernel>("NoOp"); }
};
/// Typed code's registration of Reshape's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Reshape, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::reshape_kernel>("Reshape"); }
};
/// Typed code's registration of Transpose's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Transpose, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::transpose_kernel>("Transpose"); }
};
/// Typed code's registration of ConcatV2's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::ConcatV2, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::concat_kernel>("ConcatV2"); }
};
/// Typed code's registration of Split's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Split, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::split_kernel>("Split"); }
};
/// Typed code's registration of Slice's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Slice, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::slice_kernel>("Slice"); }
};
/// Typed code's registration of Pad's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Pad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::pad_kernel>("Pad"); }
};
/// Typed code's registration of Tile's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Tile, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::tile_kernel>("Tile"); }
};
/// Typed code's registration of GatherV2's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::GatherV2, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::gather_kernel>("GatherV2"); }
};
/// Typed code's registration of OneHot's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::OneHot, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::one_hot_kernel>("OneHot"); }
};
/// Typed code's registration of GatherNd's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::GatherNd, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::gather_nd_kernel>("GatherNd"); }
};
/// Typed code's registration of TensorScatterUpdate's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::TensorScatterUpdate, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::tensor_scatter_update_kernel>("TensorScatterUpdate"); }
};
/// Typed code's registration of Shape's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Shape, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::shape_kernel>("Shape"); }
};
/// Typed code's registration of Rank's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Rank, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::rank_kernel>("Rank"); }
};
/// Typed code's registration of Size's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Size, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::size_kernel>("Size"); }
};
/// Typed code's registration of Fill's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Fill, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::fill_kernel>("Fill"); }
};
/// Typed code's registration of ZerosLike's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::ZerosLike, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::zeros_like_kernel>("ZerosLike"); }
};
/// Typed code's registration of OnesLike's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::OnesLike, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::ones_like_kernel<>>("OnesLike"); }
};
/// Typed code's registration of ExpandDims's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::ExpandDims, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::expand_dims_kernel>("ExpandDims"); }
};
/// Typed code's registration of Squeeze's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Squeeze, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::squeeze_kernel>("Squeeze"); }
};
/// Typed code's registration of Pack's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Pack, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::pack_kernel>("Pack"); }
};
/// Typed code's registration of Unpack's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Unpack, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::unpack_kernel>("Unpack"); }
};
/// Typed code's registration of ReverseV2's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::ReverseV2, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::reverse_kernel>("ReverseV2"); }
};
/// Typed code's registration of StridedSlice's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::StridedSlice, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::strided_slice_kernel>("StridedSlice"); }
};
/// Typed code's registration of StridedSliceGrad's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::StridedSliceGrad, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::strided_slice_grad_kernel>("StridedSliceGrad"); }
};
/// Typed code's registration of SplitV's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::SplitV, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::split_v_kernel>("SplitV"); }
};
/// Typed code's registration of StopGradient's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::StopGradient, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::identity_kernel>("StopGradient"); }
};
/// Typed code's registration of PreventGradient's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::PreventGradient, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::identity_kernel>("PreventGradient"); }
};
/// Typed code's registration of Snapshot's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::Snapshot, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::snapshot_kernel>("Snapshot"); }
};
/// Typed code's registration of EnsureShape's CPU kernel (framework/kernel_for.hpp).
template <class T>  // one kernel class for every dtype
struct kernel_for<ops::EnsureShape, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::ensure_shape_kernel>("EnsureShape"); }
};
/// Typed code's registration of Where's CPU kernel for dtype T (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Where, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::where_kernel<T>>("Where", {"T", dtype_of<T>}); }
};
/// Typed code's registration of Range's CPU kernel for dtype T (framework/kernel_for.hpp).
template <class T>
struct kernel_for<ops::Range, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { register_cpu_kernel<cpu::range_kernel<T>>("Range", {"Tidx", dtype_of<T>}); }
};
/// Typed code's registration of every core op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::core, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_core_kernels(); }
};
/// Typed code's registration of every array op's CPU kernels (the family at once). A
/// partial specialization, so that including it instantiates nothing.
template <class T>
struct kernel_for<ops::families::array, T, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() { cpu::register_array_kernels(); }
};
}  // namespace weft

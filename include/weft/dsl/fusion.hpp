// Elementwise fusion (DESIGN.md §2, layer 2). Lowering turns every maximal subtree of
// elementwise ops (casts, comparisons and select included) into one "Fused" node whose
// kernel, compiled from the subtree's type, evaluates the whole subtree in one pass over
// contiguous shards: one Eigen array expression per shard, vectorized, the shards spread
// over the intra-op threads. Intermediate results never reach memory.
//
// The node's attrs: `expr` (the subtree's signature, which names its compiled kernel),
// `slots` (which input each leaf of the subtree reads; a leaf used twice is one input),
// `T` (the result dtype) and `Tin` (the inputs' dtypes).
//
// Covered: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16
// and bool subtrees, without integer Div or Pow (whose kernels check their operands).
// float16 and bfloat16 compute in float32 and the narrow integers in int64, as their
// kernels do (cpu::compute_t), and each op's result is rounded (or wrapped) back to its
// dtype inside the pass, so fused and unfused results are identical. uint32, uint64 and
// the complex types lower one node per op, as do all ops when fusion is off.
//
// Broadcasting: operands of the output's shape and static scalars (rank 0) are read in
// place. Row operands (a bias [n] beside [batch, n]: the output's trailing dims, all of the
// same size, at least 32 elements) are read in place too, the pass going row by row. Any
// other broadcast operand is first expanded to the output's shape (one extra pass over
// memory for that operand).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>

namespace weft {

namespace detail {

// Kernels of fused subtrees by signature, registered by the lowering that creates them.
class fused_kernel_registry {
 public:
  void add(const std::string& signature, std::unique_ptr<op_kernel> (*factory)(const node&)) {
    std::unique_lock lock(mutex_);
    factories_.emplace(signature, factory);
  }
  std::unique_ptr<op_kernel> create(const node& n) const {
    const auto& sig = n.attr<std::string>("expr");
    std::shared_lock lock(mutex_);
    auto it = factories_.find(sig);
    if (it == factories_.end())
      fail(error_code::not_found, n.describe(), ": no compiled kernel for the fused expression '", sig,
           "' (fused nodes are created by typed weft code, whose lowering compiles and registers their kernels; "
           "this program did not build that expression)");
    return it->second(n);
  }
  static fused_kernel_registry& global() {
    static auto* instance = new fused_kernel_registry;  // never destroyed (see op_registry)
    return *instance;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<op_kernel> (*)(const node&), std::less<>> factories_;
};

inline std::vector<op_def> fused_op_defs() {
  return {op_def_builder("Fused")
              .input("x: Tin")
              .output("y: T")
              .attr("T: type")
              .attr("Tin: list(type)")
              .attr("expr: string")
              .attr("slots: list(int)")
              .shape_fn(ops::broadcast_inputs)
              .build()};
}

inline void register_fused_op() {
  static const bool done = [] {
    op_registry::global().add_family("fused", fused_op_defs);
    kernel_registry::global().add("Fused", "CPU", {}, [](const node& n) {
      return fused_kernel_registry::global().create(n);
    });
    return true;
  }();
  (void)done;
}

// ---- which expressions fuse ----------------------------------------------------------
template <class T>
inline constexpr bool fusable_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
    std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t> ||
    std::is_same_v<T, bool>;

template <class E>
struct interior : std::false_type {};  // a leaf of the fused subtree
template <class Op, class T, class S, class... Args>
struct interior<op_expr<Op, T, S, Args...>>
    : std::bool_constant<Op::elementwise && fusable_type_v<T> && (fusable_type_v<value_type_of<Args>> && ...) &&
                         !((std::string_view(Op::name) == "Div" || std::string_view(Op::name) == "Pow") &&
                           std::is_integral_v<value_type_of<std::tuple_element_t<0, std::tuple<Args...>>>>)> {};

template <class E>
struct fused_count {  // interior nodes, leaves
  static constexpr std::size_t ops = 0, leaves = 1;
};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct fused_count<op_expr<Op, T, S, Args...>> {
  static constexpr std::size_t ops = 1 + (fused_count<Args>::ops + ... + 0);
  static constexpr std::size_t leaves = (fused_count<Args>::leaves + ... + 0);
};

// The offset of operand I's first leaf among its parent's leaves.
template <class Tuple, std::size_t I>
constexpr std::size_t leaf_offset() {
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    return (fused_count<std::tuple_element_t<J, Tuple>>::leaves + ... + 0);
  }(std::make_index_sequence<I>{});
}

// "Add:float32(Mul:float32($float32,$float32s),$float32)": the ops, dtypes and structure
// of a subtree; a leaf is $dtype, with s when it is a static scalar.
template <class E>
void append_signature(std::string& out) {
  if constexpr (interior<E>::value) {
    using Op = typename E::op_type;
    out += Op::name;
    out += ':';
    out += name(dtype_of<value_type_of<E>>);
    out += '(';
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((out += (I ? "," : ""), append_signature<std::tuple_element_t<I, typename E::args_type>>(out)), ...);
    }(std::make_index_sequence<std::tuple_size_v<typename E::args_type>>{});
    out += ')';
  } else {
    out += '$';
    out += name(dtype_of<value_type_of<E>>);
    if (shape_of<E>::rank == 0) out += 's';
  }
}

// Lowers the leaves of a subtree, in order.
template <class E>
void lower_leaves(lowering& cx, const E& e, std::vector<output>& out) {
  if constexpr (interior<E>::value)
    std::apply([&](const auto&... a) { (lower_leaves(cx, a, out), ...); }, e.args());
  else
    out.push_back(weft::lower(cx, e));
}

// The Eigen expression of subtree E over elements [s, s + len), its leaves read from `in`
// starting at leaf Off, in E's compute type (cpu::compute_t). A converted dtype's results
// go through the dtype and back (rounded, or wrapped), as its unfused kernel stores them.
template <std::size_t Off, class E>
auto fused_eval(const void* const* in, std::int64_t s, std::int64_t len) {
  using T = value_type_of<E>;
  using C = cpu::compute_t<T>;
  if constexpr (interior<E>::value) {
    using Args = typename E::args_type;
    auto r = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return E::op_type::apply(fused_eval<Off + leaf_offset<Args, I>(), std::tuple_element_t<I, Args>>(in, s, len)...);
    }(std::make_index_sequence<std::tuple_size_v<Args>>{});
    if constexpr (cpu::is_converted_v<T>)
      return r.template cast<T>().template cast<C>();
    else
      return r;
  } else {
    const T* p = static_cast<const T*>(in[Off]);
    if constexpr (shape_of<E>::rank == 0)
      return Eigen::Array<C, Eigen::Dynamic, 1>::Constant(len, static_cast<C>(*p));
    else if constexpr (cpu::is_converted_v<T>)
      return cpu::array_map<T>(p + s, len).template cast<C>();
    else
      return cpu::array_map<T>(p + s, len);
  }
}

// Stores the subtree's values (compute type) as T.
template <class T, class X>
void store(T* out, std::int64_t len, const X& values) {
  if constexpr (cpu::is_converted_v<T>)
    cpu::array_out<T>(out, len) = values.template cast<T>();
  else
    cpu::array_out<T>(out, len) = values;
}

template <class E>
class fused_kernel final : public op_kernel {
 public:
  static constexpr std::size_t leaves = fused_count<E>::leaves;
  using T = value_type_of<E>;

  explicit fused_kernel(const node& n) {
    const auto& slots = n.attr<std::vector<std::int64_t>>("slots");
    if (slots.size() != leaves)
      fail(error_code::invalid_argument, n.describe(), ": attr 'slots' has ", slots.size(), " entries, the expression ",
           leaves, " leaves");
    for (std::size_t i = 0; i < leaves; ++i) {
      if (slots[i] < 0 || slots[i] >= n.num_inputs())
        fail(error_code::invalid_argument, n.describe(), ": slot ", i, " reads input ", slots[i], " of ", n.num_inputs());
      slots_[i] = static_cast<int>(slots[i]);
    }
  }

  void compute(kernel_context& ctx) const override {
    shape out_shape = ctx.input(0).shape();
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      auto b = broadcast(out_shape, ctx.input(i).shape());
      if (!b) {
        std::ostringstream shapes;
        for (int j = 0; j < ctx.num_inputs(); ++j) shapes << (j ? ", " : "") << ctx.input(j).shape();
        fail(error_code::invalid_argument, "operand shapes cannot be broadcast (", shapes.str(), ")");
      }
      out_shape = *b;
    }
    static constexpr auto scalar_leaf = [] {
      std::array<bool, leaves> out{};
      std::size_t k = 0;
      mark<E>(out, k);
      return out;
    }();
    static constexpr auto sizeof_leaf = [] {
      std::array<std::int64_t, leaves> out{};
      std::size_t k = 0;
      leaf_sizes<E>(out, k);
      return out;
    }();
    // Row operands: the first one's size is the row length; others of that size join it.
    std::int64_t row = 0;
    for (std::size_t i = 0; i < leaves && row == 0; ++i)
      if (!scalar_leaf[i]) row = row_length(ctx.input(slots_[i]).shape(), out_shape);
    // Operands of another shape are expanded to the output's first.
    std::vector<tensor> expanded(static_cast<std::size_t>(ctx.num_inputs()));
    std::array<const void*, leaves> ptr{};
    std::array<bool, leaves> advances{};  // read at the row's offset (full operands)
    for (std::size_t i = 0; i < leaves; ++i) {
      const tensor& x = ctx.input(slots_[i]);
      if (scalar_leaf[i] || x.shape() == out_shape || (row > 0 && row_length(x.shape(), out_shape) == row)) {
        ptr[i] = x.raw_data();
        advances[i] = !scalar_leaf[i] && x.shape() == out_shape;
        continue;
      }
      auto& e = expanded[static_cast<std::size_t>(slots_[i])];
      if (!e.valid()) e = expand(ctx, x, out_shape);
      ptr[i] = e.raw_data();
      advances[i] = true;
    }
    tensor& out = ctx.allocate_output(0, out_shape);
    T* o = out.data<T>();
    const std::int64_t n = out_shape.num_elements();
    if (row == 0) {
      const void* const* in = ptr.data();
      ctx.parallel_for(n, 2.0 * fused_count<E>::ops, [&](std::int64_t s, std::int64_t e) {
        store(o + s, e - s, fused_eval<0, E>(in, s, e - s));
      });
      return;
    }
    // Row by row: full operands at the row's offset, row operands at their start.
    ctx.parallel_for(n / row, 2.0 * fused_count<E>::ops * static_cast<double>(row),
                     [&](std::int64_t first, std::int64_t last) {
                       std::array<const void*, leaves> at{};
                       for (std::int64_t r = first; r < last; ++r) {
                         for (std::size_t i = 0; i < leaves; ++i)
                           at[i] = advances[i] ? static_cast<const char*>(ptr[i]) + r * row * sizeof_leaf[i] : ptr[i];
                         store(o + r * row, row, fused_eval<0, E>(at.data(), 0, row));
                       }
                     });
  }

 private:
  template <class X>
  static constexpr void mark(std::array<bool, leaves>& out, std::size_t& k) {
    if constexpr (interior<X>::value)
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (mark<std::tuple_element_t<I, typename X::args_type>>(out, k), ...);
      }(std::make_index_sequence<std::tuple_size_v<typename X::args_type>>{});
    else
      out[k++] = shape_of<X>::rank == 0;
  }

  template <class X>
  static constexpr void leaf_sizes(std::array<std::int64_t, leaves>& out, std::size_t& k) {
    if constexpr (interior<X>::value)
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (leaf_sizes<std::tuple_element_t<I, typename X::args_type>>(out, k), ...);
      }(std::make_index_sequence<std::tuple_size_v<typename X::args_type>>{});
    else
      out[k++] = static_cast<std::int64_t>(sizeof(value_type_of<X>));
  }

  // The row length when x is a row of `out` (x without its leading 1s equals out's trailing
  // dims, out has more elements, and a row has at least 32 elements); else 0.
  static std::int64_t row_length(const shape& x, const shape& out) {
    int lead = 0;
    while (lead < x.rank() && x[lead] == 1) ++lead;
    int k = x.rank() - lead;
    if (k == 0 || k > out.rank()) return 0;
    std::int64_t n = 1;
    for (int i = 0; i < k; ++i) {
      if (x[lead + i] != out[out.rank() - k + i]) return 0;
      n *= x[lead + i];
    }
    return n >= 32 && n < out.num_elements() ? n : 0;
  }

  static tensor expand(kernel_context& ctx, const tensor& x, const shape& to) {
    tensor out(x.dtype(), to, ctx.device().get_allocator());
    std::size_t size = size_of(x.dtype());
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    std::array<std::vector<std::int64_t>, 1> strides{cpu::broadcast_strides(x.shape(), to)};
    cpu::for_each_broadcast<1>(to, strides, 0, to.num_elements(), [&](std::int64_t i, const std::array<std::int64_t, 1>& off) {
      std::memcpy(dst + static_cast<std::size_t>(i) * size, src + static_cast<std::size_t>(off[0]) * size, size);
    });
    return out;
  }

  std::array<int, leaves> slots_{};
};

template <class E>
std::unique_ptr<op_kernel> make_fused_kernel(const node& n) {
  return std::make_unique<fused_kernel<E>>(n);
}

template <class E>
std::optional<output> try_fuse(lowering& cx, const E& e) {
  if constexpr (!interior<E>::value || fused_count<E>::ops < 2) {
    return std::nullopt;
  } else {
    static const std::string signature = [] {
      std::string s;
      append_signature<E>(s);
      return s;
    }();
    WEFT_DETAIL_ONCE(register_fused_op(), fused_kernel_registry::global().add(signature, &make_fused_kernel<E>));
    std::vector<output> leaves;
    lower_leaves(cx, e, leaves);
    std::vector<output> inputs;
    std::vector<std::int64_t> slots;
    for (const auto& l : leaves) {
      auto it = std::find(inputs.begin(), inputs.end(), l);
      slots.push_back(it - inputs.begin());
      if (it == inputs.end()) inputs.push_back(l);
    }
    return cx.add("Fused", std::move(inputs),
                  {{"expr", signature}, {"slots", std::move(slots)}, {"T", dtype_of<value_type_of<E>>}}, e.scope(),
                  E::op_type::name);
  }
}

}  // namespace detail

}  // namespace weft

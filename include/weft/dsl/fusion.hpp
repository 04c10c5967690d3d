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
// Covered: subtrees of every dtype but string, without integer Div or Pow (whose kernels
// check their operands) and casts from complex to real. float16 and bfloat16 compute in
// float32, the narrow integers in int64 and uint32 in uint64, as their kernels do
// (cpu::compute_t), and each op's result is rounded (or wrapped) back to its dtype inside
// the pass, so fused and unfused results are identical. Subtrees with a uint32 or uint64
// node run one element at a time (those types have no Eigen kernels), the others as
// vectorized Eigen expressions. All ops lower one node each when fusion is off.
//
// Broadcasting: operands of the output's shape and static scalars (rank 0) are read in
// place. Otherwise the pass goes in blocks along the rows of cpu::broadcast_rows (dims of
// 1 dropped, dims merged where every operand steps through them as one): along a row,
// each operand steps one element at a time or repeats one value. Operands that step (a
// bias [n] beside [batch, n], a [1, m, n] beside [b, m, n]) are read in place; a repeated
// value (a column [batch, 1], a [b, 1, 1], a fed [1, 1]) comes from a buffer of one block
// filled with it, which stays in the cache. Where rows are short (under 64 elements), a
// block is several rows and each broadcast operand is copied into a block-long buffer.
// Every broadcast is one pass over memory.
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
#include <weft/kernels/cpu/broadcast_rows.hpp>

namespace weft {

namespace detail {

// Functions compiled for fused subtrees, by the subtree's signature (the Fused node's
// `expr`), registered by the typed code that builds the subtree: one table per function
// type (kernel factories here, gradients in gradient.hpp).
template <class Fn>
class signature_table {
 public:
  static signature_table& global() {
    static auto* instance = new signature_table;  // never destroyed (see op_registry)
    return *instance;
  }
  void add(const std::string& signature, Fn fn) {
    std::unique_lock lock(mutex_);
    fns_.emplace(signature, fn);
  }
  Fn find(std::string_view signature) const {
    std::shared_lock lock(mutex_);
    auto it = fns_.find(signature);
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, Fn, std::less<>> fns_;
};

using fused_kernel_factory = std::unique_ptr<op_kernel> (*)(const node&);
using fused_kernel_registry = signature_table<fused_kernel_factory>;

inline std::unique_ptr<op_kernel> create_fused_kernel(const node& n) {
  const auto& sig = n.attr<std::string>("expr");
  auto factory = fused_kernel_registry::global().find(sig);
  if (!factory)
    fail(error_code::not_found, n.describe(), ": no compiled kernel for the fused expression '", sig,
         "' (fused nodes are created by typed weft code, whose lowering compiles and registers their kernels; "
         "this program did not build that expression)");
  return factory(n);
}

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
    kernel_registry::global().add("Fused", "CPU", {}, &create_fused_kernel);
    return true;
  }();
  (void)done;
}

// ---- which expressions fuse ----------------------------------------------------------
template <class T>
inline constexpr bool fusable_type_v = std::is_same_v<T, bool> || std::is_arithmetic_v<T> || cpu::is_half_v<T> ||
                                       std::is_same_v<T, complex64> || std::is_same_v<T, complex128>;

// Casts from a complex type to a real one are not fused (TensorFlow's Cast takes the real
// part; Eigen's cast does not compile): the Cast is its own node.
template <class Op>
struct complex_to_real_cast : std::false_type {};
template <class To, class From>
struct complex_to_real_cast<cast_op<To, From>>
    : std::bool_constant<Eigen::NumTraits<From>::IsComplex && !Eigen::NumTraits<To>::IsComplex> {};

// Whether an op node fuses (an elementwise op of fusable types, not integer Div or Pow).
template <class Op, class T, class... Args>
constexpr bool fuses() {
  if constexpr (!Op::elementwise) {
    return false;  // (not every other descriptor has a static name)
  } else {
    return fusable_type_v<T> && (fusable_type_v<value_type_of<Args>> && ...) && !complex_to_real_cast<Op>::value &&
           !((std::string_view(Op::name) == "Div" || std::string_view(Op::name) == "Pow") &&
             std::is_integral_v<value_type_of<std::tuple_element_t<0, std::tuple<Args...>>>>);
  }
}
template <class E>
struct interior : std::false_type {};  // a leaf of the fused subtree
template <class Op, class T, class S, class... Args>
struct interior<op_expr<Op, T, S, Args...>> : std::bool_constant<fuses<Op, T, Args...>()> {};

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

// The value of subtree E at element j of its leaves (static scalars at element 0), one
// element at a time, for subtrees with a type that has no Eigen kernels (uint32, uint64).
template <std::size_t Off, class E>
auto fused_scalar(const void* const* in, std::int64_t j) {
  using T = value_type_of<E>;
  using C = cpu::compute_t<T>;
  if constexpr (interior<E>::value) {
    using Args = typename E::args_type;
    auto r = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return E::op_type::scalar(fused_scalar<Off + leaf_offset<Args, I>(), std::tuple_element_t<I, Args>>(in, j)...);
    }(std::make_index_sequence<std::tuple_size_v<Args>>{});
    return static_cast<C>(static_cast<T>(r));  // rounded or wrapped to T, as stored
  } else {
    return static_cast<C>(static_cast<const T*>(in[Off])[shape_of<E>::rank == 0 ? 0 : j]);
  }
}

// Whether a subtree has a node or leaf computed in plain loops (no Eigen kernels).
template <class E>
struct has_looped_type : std::bool_constant<cpu::is_looped_v<cpu::compute_t<value_type_of<E>>>> {};
template <class Op, class T, class S, class... Args>
  requires interior<op_expr<Op, T, S, Args...>>::value
struct has_looped_type<op_expr<Op, T, S, Args...>>
    : std::bool_constant<cpu::is_looped_v<cpu::compute_t<T>> || (has_looped_type<Args>::value || ...)> {};

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
    // Per leaf: a static scalar (rank 0)? its element size.
    static constexpr auto scalar_leaf = [] {
      std::array<bool, leaves> out{};
      std::size_t k = 0;
      each_leaf<E>([&]<class L>() { out[k++] = shape_of<L>::rank == 0; });
      return out;
    }();
    static constexpr auto sizeof_leaf = [] {
      std::array<std::int64_t, leaves> out{};
      std::size_t k = 0;
      each_leaf<E>([&]<class L>() { out[k++] = static_cast<std::int64_t>(sizeof(value_type_of<L>)); });
      return out;
    }();
    const std::int64_t n = out_shape.num_elements();
    std::array<const char*, leaves> ptr{};
    std::array<const shape*, leaves> shapes{};
    std::array<bool, leaves> full{};
    bool all_full = true;
    for (std::size_t i = 0; i < leaves; ++i) {
      const tensor& x = ctx.input(slots_[i]);
      ptr[i] = static_cast<const char*>(x.raw_data());
      shapes[i] = &x.shape();
      full[i] = !scalar_leaf[i] && x.shape() == out_shape;
      all_full = all_full && (scalar_leaf[i] || full[i]);
    }
    tensor& out = ctx.allocate_output(0, out_shape);
    T* o = out.data<T>();
    if (n == 0) return;
    if (all_full) {
      std::array<const void*, leaves> in;
      std::copy(ptr.begin(), ptr.end(), in.begin());
      ctx.parallel_for(n, 2.0 * fused_count<E>::ops, [&](std::int64_t s, std::int64_t e) {
        eval_chunk(o + s, in.data(), s, e - s);
      });
      return;
    }
    // Broadcast operands: the pass goes in blocks of the output. A block is one piece of a
    // row, or, where rows are short, several whole rows. Per block, full operands (and
    // operands stepping along a one-row block, such as a bias) are read in place; a value
    // repeated along a row (a column, a run-time scalar) and any operand of a many-row block
    // are copied into a block-long buffer, which stays in the cache.
    const cpu::broadcast_rows<leaves> rows(out_shape, shapes);
    const std::int64_t per_block = rows.length() >= 64 ? 1 : (1024 + rows.length() - 1) / rows.length();
    const std::int64_t block = per_block == 1 ? rows.piece() : per_block * rows.length();
    const std::int64_t blocks = (rows.units() + per_block - 1) / per_block;
    // How each leaf is read per block.
    enum class read : unsigned char { fixed, at_output, at_offset, copied, repeated };
    std::array<read, leaves> how{};
    for (std::size_t i = 0; i < leaves; ++i)
      how[i] = scalar_leaf[i]                     ? read::fixed
               : full[i]                          ? read::at_output
               : !rows.steps(i) || per_block > 1 ? (rows.steps(i) ? read::copied : read::repeated)
                                                  : read::at_offset;
    ctx.parallel_for(blocks, 2.0 * fused_count<E>::ops * static_cast<double>(block), [&](std::int64_t first, std::int64_t last) {
      std::array<const void*, leaves> at{};
      std::array<std::vector<char>, leaves> scratch;
      std::array<std::int64_t, leaves> filled;  // the element a one-row buffer repeats, or -1
      filled.fill(-1);
      for (std::size_t i = 0; i < leaves; ++i) {
        at[i] = ptr[i];
        if (how[i] == read::copied || how[i] == read::repeated) {
          scratch[i].resize(static_cast<std::size_t>(block * sizeof_leaf[i]));
          at[i] = scratch[i].data();
        }
      }
      // One walk over the blocks' units; a block is evaluated when its last unit is in.
      std::int64_t start = -1, len = 0, in_block = 0;
      rows.each(first * per_block, std::min(last * per_block, rows.units()),
                [&](std::int64_t o_off, std::int64_t l, const std::array<std::int64_t, leaves>& off) {
                  if (start < 0) start = o_off;
                  for (std::size_t i = 0; i < leaves; ++i) {
                    // The row's start in leaf i, and the place in its block buffer (only
                    // copied and repeated leaves have one: no offset is added to the empty
                    // buffers' null data()).
                    auto src = [&] { return ptr[i] + off[i] * sizeof_leaf[i]; };
                    auto dst = [&] { return scratch[i].data() + len * sizeof_leaf[i]; };
                    switch (how[i]) {
                      case read::fixed: break;
                      case read::at_output: at[i] = ptr[i] + start * sizeof_leaf[i]; break;
                      case read::at_offset: at[i] = src(); break;
                      case read::copied: std::memcpy(dst(), src(), static_cast<std::size_t>(l * sizeof_leaf[i])); break;
                      case read::repeated:
                        if (per_block > 1) {
                          cpu::replicate_bytes(dst(), src(), sizeof_leaf[i], l);
                        } else if (filled[i] != off[i]) {  // one row: fill the whole buffer once per value
                          cpu::replicate_bytes(dst(), src(), sizeof_leaf[i], block);
                          filled[i] = off[i];
                        }
                        break;
                    }
                  }
                  len += l;
                  if (++in_block < per_block && o_off + l < n) return;
                  eval_chunk(o + start, at.data(), 0, len);
                  start = -1, len = 0, in_block = 0;
                });
    });
  }

 private:
  // Calls f.template operator()<Leaf>() for each leaf of subtree X, in order.
  template <class X, class F>
  static constexpr void each_leaf(F&& f) {
    if constexpr (interior<X>::value)
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (each_leaf<std::tuple_element_t<I, typename X::args_type>>(f), ...);
      }(std::make_index_sequence<std::tuple_size_v<typename X::args_type>>{});
    else
      f.template operator()<X>();
  }

  // out[0, len) = the subtree at elements [s, s + len) of the leaves.
  static void eval_chunk(T* out, const void* const* in, std::int64_t s, std::int64_t len) {
    if constexpr (has_looped_type<E>::value) {
      for (std::int64_t i = 0; i < len; ++i) out[i] = static_cast<T>(fused_scalar<0, E>(in, s + i));
    } else {
      store(out, len, fused_eval<0, E>(in, s, len));
    }
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

/// @file
/// The CPU kernels of Fused nodes (ops/fused_ops.hpp): compiled from the subtree's type, a
/// kernel evaluates the whole subtree in one pass over contiguous shards, one Eigen array
/// expression per shard, vectorized, the shards spread over the intra-op threads.
/// Intermediate results never reach memory.
///
/// float16 and bfloat16 compute in float32, the narrow integers in int64 and uint32 in
/// uint64, as their kernels do (compute_t), and each op's result is rounded (or wrapped) back
/// to its dtype inside the pass, so fused and unfused results are identical. Subtrees with a
/// uint32 or uint64 node run one element at a time (those types have no Eigen kernels), the
/// others as vectorized Eigen expressions.
///
/// Broadcasting: operands of the output's shape and static scalars (rank 0) are read in
/// place. Otherwise the pass goes in blocks along the rows of broadcast_rows (dims of 1
/// dropped, dims merged where every operand steps through them as one): along a row, each
/// operand steps one element at a time or repeats one value. Operands that step (a bias [n]
/// beside [batch, n], a [1, m, n] beside [b, m, n]) are read in place; a repeated value (a
/// column [batch, 1], a [b, 1, 1], a fed [1, 1]) comes from a buffer of one block filled with
/// it, which stays in the cache. Where rows are short (under 64 elements), a block is several
/// rows and each broadcast operand is copied into a block-long buffer. Every broadcast is one
/// pass over memory.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <weft/framework/kernel_for.hpp>
#include <weft/framework/signature_table.hpp>
#include <weft/kernels/cpu/broadcast_rows.hpp>
#include <weft/kernels/cpu/common.hpp>
#include <weft/kernels/cpu/elementwise.hpp>
#include <weft/ops/fused_ops.hpp>

namespace weft::cpu {

/// How a fused subtree applies op Op with result dtype T: its CPU functor (elementwise.hpp),
/// on Eigen arrays (apply) or one element (scalar).
template <class Op, class T>
struct fused_fn {
  /// Op over Eigen arrays.
  template <class... A>
  static auto apply(const A&... a) {
    return functor_of<Op>::apply(a...);
  }
  /// Op over one element of each operand.
  template <class... A>
  static auto scalar(const A&... a) {
    return functor_of<Op>::scalar(a...);
  }
};
/// SelectV2 in a fused subtree: a where c, else b.
template <class T>
struct fused_fn<ops::SelectV2, T> {
  /// Over Eigen arrays.
  template <class C, class A, class B>
  static auto apply(const C& c, const A& a, const B& b) {
    return c.select(a, b);
  }
  /// Over one element of each operand.
  template <class A>
  static A scalar(bool c, const A& a, const A& b) {
    return c ? a : b;
  }
};
/// Cast in a fused subtree: from the operand's compute type to To's.
template <class To>
struct fused_fn<ops::Cast, To> {
  /// Over an Eigen array.
  template <class A>
  static auto apply(const A& a) {
    return a.template cast<compute_t<To>>();
  }
  /// Over one element.
  template <class A>
  static auto scalar(const A& a) {
    return static_cast<compute_t<To>>(a);
  }
};

namespace fusion {

/// The Eigen expression of subtree E over elements [s, s + len), its leaves read from `in`
/// starting at leaf Off, in E's compute type. A converted dtype's results go through the
/// dtype and back (rounded, or wrapped), as its unfused kernel stores them.
template <std::size_t Off, class E>
auto eval(const void* const* in, std::int64_t s, std::int64_t len) {
  using T = typename E::value_type;
  using C = compute_t<T>;
  if constexpr (fused::count<E>::ops > 0) {
    auto r = [&]<class Op, class... Args>(fused::apply<Op, T, Args...>*) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return fused_fn<Op, T>::apply(eval<Off + fused::leaf_offset<I, Args...>(), Args>(in, s, len)...);
      }(std::index_sequence_for<Args...>{});
    }(static_cast<E*>(nullptr));
    if constexpr (is_converted_v<T>)
      return r.template cast<T>().template cast<C>();
    else
      return r;
  } else {
    const T* p = static_cast<const T*>(in[Off]);
    if constexpr (E::scalar)
      return Eigen::Array<C, Eigen::Dynamic, 1>::Constant(len, static_cast<C>(*p));
    else if constexpr (is_converted_v<T>)
      return array_map<T>(p + s, len).template cast<C>();
    else
      return array_map<T>(p + s, len);
  }
}

/// The value of subtree E at element j of its leaves (static scalars at element 0), one
/// element at a time, for subtrees with a type that has no Eigen kernels (uint32, uint64).
template <std::size_t Off, class E>
auto scalar(const void* const* in, std::int64_t j) {
  using T = typename E::value_type;
  using C = compute_t<T>;
  if constexpr (fused::count<E>::ops > 0) {
    auto r = [&]<class Op, class... Args>(fused::apply<Op, T, Args...>*) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return fused_fn<Op, T>::scalar(scalar<Off + fused::leaf_offset<I, Args...>(), Args>(in, j)...);
      }(std::index_sequence_for<Args...>{});
    }(static_cast<E*>(nullptr));
    return static_cast<C>(static_cast<T>(r));  // rounded or wrapped to T, as stored
  } else {
    return static_cast<C>(static_cast<const T*>(in[Off])[E::scalar ? 0 : j]);
  }
}

/// Whether a subtree has a node or leaf computed in plain loops (no Eigen kernels).
template <class E>
struct has_looped_type : std::bool_constant<is_looped_v<compute_t<typename E::value_type>>> {};
template <class Op, class T, class... Args>
struct has_looped_type<fused::apply<Op, T, Args...>>
    : std::bool_constant<is_looped_v<compute_t<T>> || (has_looped_type<Args>::value || ...)> {};

/// Stores the subtree's values (compute type) as T.
template <class T, class X>
void store(T* out, std::int64_t len, const X& values) {
  if constexpr (is_converted_v<T>)
    array_out<T>(out, len) = values.template cast<T>();
  else
    array_out<T>(out, len) = values;
}

}  // namespace fusion

/// The CPU kernel of a Fused node whose subtree is E: one pass over the output, each block
/// of elements one Eigen expression of the whole subtree.
template <class E>
class fused_kernel final : public op_kernel {
 public:
  static constexpr std::size_t leaves = fused::count<E>::leaves;  ///< the subtree's leaves
  using T = typename E::value_type;  ///< the output's element type

  /// The kernel of node n: its attrs are read and checked here, once.
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
    static constexpr auto scalar_leaf = []<class... L>(type_list<L...>) {
      return std::array<bool, leaves>{L::scalar...};
    }(typename fused::leaves_of<E>::type{});
    static constexpr auto sizeof_leaf = []<class... L>(type_list<L...>) {
      return std::array<std::int64_t, leaves>{static_cast<std::int64_t>(sizeof(typename L::value_type))...};
    }(typename fused::leaves_of<E>::type{});
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
      ctx.parallel_for(n, 2.0 * fused::count<E>::ops, [&](std::int64_t s, std::int64_t e) {
        eval_chunk(o + s, in.data(), s, e - s);
      });
      return;
    }
    // Broadcast operands: the pass goes in blocks of the output. A block is one piece of a
    // row, or, where rows are short, several whole rows. Per block, full operands (and
    // operands stepping along a one-row block, such as a bias) are read in place; a value
    // repeated along a row (a column, a run-time scalar) and any operand of a many-row block
    // are copied into a block-long buffer, which stays in the cache.
    const broadcast_rows<leaves> rows(out_shape, shapes);
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
    ctx.parallel_for(blocks, 2.0 * fused::count<E>::ops * static_cast<double>(block), [&](std::int64_t first, std::int64_t last) {
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
                          replicate_bytes(dst(), src(), sizeof_leaf[i], l);
                        } else if (filled[i] != off[i]) {  // one row: fill the whole buffer once per value
                          replicate_bytes(dst(), src(), sizeof_leaf[i], block);
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
  /// out[0, len) = the subtree at elements [s, s + len) of the leaves. Flattened (every call
  /// inlined): in a long chain GCC left Eigen's tanh a call per packet, its operand through
  /// the stack (`bench_fusion`'s 8-op chain on one thread: 1.32 times the same expression
  /// written with Eigen by hand; docs/benchmarks.md, session 64).
  [[gnu::flatten]]
  static void eval_chunk(T* out, const void* const* in, std::int64_t s, std::int64_t len) {
    if constexpr (fusion::has_looped_type<E>::value) {
      for (std::int64_t i = 0; i < len; ++i) out[i] = static_cast<T>(fusion::scalar<0, E>(in, s + i));
    } else {
      fusion::store(out, len, fusion::eval<0, E>(in, s, len));
    }
  }

  std::array<int, leaves> slots_{};
};

/// A fused_kernel of E for node n (fused_kernel_table's factories).
template <class E>
std::unique_ptr<op_kernel> make_fused_kernel(const node& n) {
  return std::make_unique<fused_kernel<E>>(n);
}

/// The CPU's compiled fused kernels, by signature.
using fused_kernel_factory = std::unique_ptr<op_kernel> (*)(const node&);
using fused_kernel_table = signature_table<fused_kernel_factory>;  ///< factories by fused::signature

/// The kernel of Fused node n from the table (its `expr` attr), or a not_found error saying
/// that this program did not compile that expression.
inline std::unique_ptr<op_kernel> create_fused_kernel(const node& n) {
  const auto& sig = n.attr<std::string>("expr");
  auto factory = fused_kernel_table::global().find(sig);
  if (!factory)
    fail(error_code::not_found, n.describe(), ": no compiled kernel for the fused expression '", sig,
         "' (fused nodes are created by typed weft code, whose lowering compiles and registers their kernels; "
         "this program did not build that expression)");
  return factory(n);
}

}  // namespace weft::cpu

namespace weft {
/// Registers the CPU kernel compiled for subtree E (and, once, the Fused op's CPU kernel,
/// which finds it by the node's signature).
template <class E>
struct kernel_for<ops::Fused<E>, void, device_types::cpu> {
  /// Registers the kernel with kernel_registry::global().
  static void register_kernels() {
    static const bool once = (kernel_registry::global().add("Fused", "CPU", {}, &cpu::create_fused_kernel), true);
    (void)once;
    cpu::fused_kernel_table::global().add(fused::signature<E>(), &cpu::make_fused_kernel<E>);
  }
};
}  // namespace weft

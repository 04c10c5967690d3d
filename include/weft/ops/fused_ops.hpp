/// @file
/// The Fused op: one node that evaluates a subtree of elementwise ops in one pass (built by
/// the typed front end's fusion, dsl/fusion.hpp), and the device-neutral description of such
/// a subtree, from which each device type's backend compiles the node's kernel
/// (kernels/cpu/fused.hpp on the CPU).
///
/// A subtree is a type: fused::apply<Op, T, Args...> is elementwise op Op (ops::Add,
/// ops::Cast, ops::SelectV2, ...) with result dtype T applied to subtrees Args;
/// fused::leaf<T, Scalar> is an input of dtype T, Scalar when it is a static scalar (rank 0).
/// Leaves are numbered left to right. The node's attrs: `expr` (the subtree's signature,
/// fused::signature<E>(), which names its compiled kernel), `slots` (which input each leaf
/// reads; a leaf used twice is one input), `T` (the result dtype) and `Tin` (the inputs').
#pragma once

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/dtype.hpp>
#include <weft/core/error.hpp>

#include <weft/core/prebuilt.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::fused {

/// A leaf of a fused subtree's type: an input of dtype T (a static scalar when Scalar).
template <class T, bool Scalar>
struct leaf {
  using value_type = T;                  ///< the input's element type
  static constexpr bool scalar = Scalar;  ///< a static scalar (broadcast from one value)
};

/// An interior node of a fused subtree's type: op Op over the subtrees Args, giving T.
template <class Op, class T, class... Args>
struct apply {
  using value_type = T;  ///< the result's element type
  using op = Op;         ///< the op type (ops::Add, ...)
};

/// Interior nodes and leaves of subtree E.
template <class E>
struct count {
  static constexpr std::size_t ops = 0;     ///< a leaf has no interior nodes
  static constexpr std::size_t leaves = 1;  ///< it is one leaf
};
/// Interior nodes and leaves of an interior node's subtree.
template <class Op, class T, class... Args>
struct count<apply<Op, T, Args...>> {
  static constexpr std::size_t ops = 1 + (count<Args>::ops + ... + 0);    ///< interior nodes
  static constexpr std::size_t leaves = (count<Args>::leaves + ... + 0);  ///< leaves
};

/// The offset of operand I's first leaf among its parent's leaves (Args: the operands).
template <std::size_t I, class... Args>
constexpr std::size_t leaf_offset() {
  constexpr std::size_t sizes[] = {count<Args>::leaves..., 0};
  std::size_t off = 0;
  for (std::size_t j = 0; j < I; ++j) off += sizes[j];
  return off;
}

/// The type_lists joined into one (`type`).
template <class... Lists>
struct concat;
/// No lists: the empty list.
template <>
struct concat<> {
  using type = type_list<>;  ///< the joined list
};
/// One list: itself.
template <class... A>
struct concat<type_list<A...>> {
  using type = type_list<A...>;  ///< the joined list
};
/// Two lists or more: the first two joined, then the rest.
template <class... A, class... B, class... Rest>
struct concat<type_list<A...>, type_list<B...>, Rest...> : concat<type_list<A..., B...>, Rest...> {};
/// The leaves of E, left to right, as a type_list (`type`).
template <class E>
struct leaves_of {
  using type = type_list<E>;  ///< a leaf: itself
};
/// The leaves of an interior node: its operands' leaves, in order.
template <class Op, class T, class... Args>
struct leaves_of<apply<Op, T, Args...>> : concat<typename leaves_of<Args>::type...> {};

namespace detail {
template <class E>
void append_signature(std::string& out) {
  out += '$';
  out += name(dtype_of<typename E::value_type>);
  if (E::scalar) out += 's';
}
template <class E>
  requires requires { typename E::op; }
void append_signature(std::string& out) {
  [&]<class Op, class T, class... Args>(apply<Op, T, Args...>*) {
    out += Op::name;
    out += ':';
    out += name(dtype_of<T>);
    out += '(';
    std::size_t i = 0;
    ((out += (i++ ? "," : ""), append_signature<Args>(out)), ...);
    out += ')';
  }(static_cast<E*>(nullptr));
}
}  // namespace detail

/// "Add:float32(Mul:float32($float32,$float32s),$float32)": the ops, dtypes and structure of
/// subtree E; a leaf is $dtype, with s when it is a static scalar.
template <class E>
const std::string& signature() {
  static const std::string s = [] {
    std::string out;
    detail::append_signature<E>(out);
    return out;
  }();
  return s;
}


// ---- a subtree read back from its signature (the GPU's code generator, and
// passes/expand_fused.hpp, which writes a Fused node out as its ops)

/// An op over operands, or a leaf (an input; `scalar` when it is a static scalar), numbered
/// left to right.
struct expr_node {
  std::string op;  ///< empty for a leaf
  dtype type = dtype::invalid;  ///< the result's (or the input's) dtype
  bool scalar = false;          ///< a leaf that is a static scalar
  int leaf = -1;                ///< a leaf's input index (-1 for an op)
  std::vector<expr_node> args;  ///< an op's operands
};

namespace detail {

class expr_parser {
 public:
  explicit expr_parser(std::string_view s) : s_(s) {}
  expr_node parse() {
    expr_node e = node(0);
    if (pos_ != s_.size()) error("text after the expression");
    return e;
  }

 private:
  expr_node node(int depth) {
    if (depth > 1000) error("an expression at most 1000 deep");
    expr_node e;
    if (take('$')) {
      e.type = parse_dtype(word());
      e.scalar = take('s');
      e.leaf = leaves_++;
      return e;
    }
    e.op = std::string(word());
    if (e.op.empty()) error("an op name or a leaf");
    if (!take(':')) error("':' after the op name");
    e.type = parse_dtype(word());
    if (!take('(')) error("'(' before the operands");
    do e.args.push_back(node(depth + 1));
    while (take(','));
    if (!take(')')) error("')' after the operands");
    return e;
  }
  std::string_view word() {
    const std::size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    // A leaf's dtype ends before its scalar mark: "$float32s".
    std::string_view w = s_.substr(start, pos_ - start);
    if (!w.empty() && w.back() == 's' && start > 0 && s_[start - 1] == '$') {
      --pos_;
      w.remove_suffix(1);
    }
    return w;
  }
  bool take(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  [[noreturn]] void error(const char* wanted) const {
    fail(error_code::invalid_argument, "Fused expr '", s_, "': expected ", wanted, " at offset ", pos_);
  }
  std::string_view s_;
  std::size_t pos_ = 0;
  int leaves_ = 0;
};

}  // namespace detail

/// The subtree a Fused node's `expr` attr names (signature<E>()'s text, parsed).
inline expr_node parse(std::string_view expr) { return detail::expr_parser(expr).parse(); }

}  // namespace weft::fused

namespace weft::ops {

/// The Fused op's definition: a subtree of elementwise ops (attr `expr`, signature<E>()'s
/// text) over inputs x, one kernel for the whole subtree.
std::vector<op_def> fused_op_defs();
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<op_def> fused_op_defs() {
  return {op_def_builder("Fused")
              .input("x: Tin")
              .output("y: T")
              .attr("T: type")
              .attr("Tin: list(type)")
              .attr("expr: string")
              .attr("slots: list(int)")
              .shape_fn(broadcast_inputs)
              .build()};
}
#endif
/// Registers the "fused" family (Fused) with the global op registry.
inline void register_fused_ops() { op_registry::global().add_family("fused", fused_op_defs); }

/// The Fused node of subtree E, as an op type: use_kernels<ops::Fused<E>>() registers the
/// kernel compiled for E on every device type.
template <class E>
struct Fused {
  static constexpr const char* name = "Fused";  ///< the op's name
  /// Registers the op's definition.
  static void define() { register_fused_ops(); }
};

}  // namespace weft::ops

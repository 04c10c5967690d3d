// The Fused op: one node that evaluates a subtree of elementwise ops in one pass (built by
// the typed front end's fusion, dsl/fusion.hpp), and the device-neutral description of such
// a subtree, from which each device type's backend compiles the node's kernel
// (kernels/cpu/fused.hpp on the CPU).
//
// A subtree is a type: fused::apply<Op, T, Args...> is elementwise op Op (ops::Add,
// ops::Cast, ops::SelectV2, ...) with result dtype T applied to subtrees Args;
// fused::leaf<T, Scalar> is an input of dtype T, Scalar when it is a static scalar (rank 0).
// Leaves are numbered left to right. The node's attrs: `expr` (the subtree's signature,
// fused::signature<E>(), which names its compiled kernel), `slots` (which input each leaf
// reads; a leaf used twice is one input), `T` (the result dtype) and `Tin` (the inputs').
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <weft/framework/op_registry.hpp>
#include <weft/ops/common.hpp>

namespace weft::fused {

template <class T, bool Scalar>
struct leaf {
  using value_type = T;
  static constexpr bool scalar = Scalar;
};

template <class Op, class T, class... Args>
struct apply {
  using value_type = T;
  using op = Op;
};

// Interior nodes and leaves of subtree E.
template <class E>
struct count {
  static constexpr std::size_t ops = 0, leaves = 1;
};
template <class Op, class T, class... Args>
struct count<apply<Op, T, Args...>> {
  static constexpr std::size_t ops = 1 + (count<Args>::ops + ... + 0);
  static constexpr std::size_t leaves = (count<Args>::leaves + ... + 0);
};

// The offset of operand I's first leaf among its parent's leaves (Args: the operands).
template <std::size_t I, class... Args>
constexpr std::size_t leaf_offset() {
  constexpr std::size_t sizes[] = {count<Args>::leaves..., 0};
  std::size_t off = 0;
  for (std::size_t j = 0; j < I; ++j) off += sizes[j];
  return off;
}

// The leaves of E, left to right, as a type_list.
template <class... Lists>
struct concat;
template <>
struct concat<> {
  using type = type_list<>;
};
template <class... A>
struct concat<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat<type_list<A...>, type_list<B...>, Rest...> : concat<type_list<A..., B...>, Rest...> {};
template <class E>
struct leaves_of {
  using type = type_list<E>;
};
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

// "Add:float32(Mul:float32($float32,$float32s),$float32)": the ops, dtypes and structure of
// subtree E; a leaf is $dtype, with s when it is a static scalar.
template <class E>
const std::string& signature() {
  static const std::string s = [] {
    std::string out;
    detail::append_signature<E>(out);
    return out;
  }();
  return s;
}

}  // namespace weft::fused

namespace weft::ops {

inline std::vector<op_def> fused_op_defs() {
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
inline void register_fused_ops() { op_registry::global().add_family("fused", fused_op_defs); }

// The Fused node of subtree E, as an op type: use_kernels<ops::Fused<E>>() registers the
// kernel compiled for E on every device type.
template <class E>
struct Fused {
  static constexpr const char* name = "Fused";
  static void define() { register_fused_ops(); }
};

}  // namespace weft::ops

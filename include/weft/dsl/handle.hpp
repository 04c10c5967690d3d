/// @file
/// Type erasure and runtime-built models (DESIGN.md §2, layer 1).
///
/// handle<T, D...>: an expression typed only by its dtype and static dims. Any expression of
/// that dtype whose shape fits the dims converts to it, so a model can be built in a runtime
/// loop and its type names stay short:
///
///   weft::handle<float, weft::dyn, 256> h = x;
///   for (int i = 0; i < layers; ++i) h = weft::relu(weft::matmul(h, w[i]) + b[i]);
///
/// raw_op<T, D...>(name, inputs, attrs): a node built by op name and attrs at run time, with
/// typed or type-erased operands, consumed by typed code as a handle. Its dtype and shape are
/// checked against T and D... when it is lowered, with an error naming the node.
///
/// wrap<T, D...>(graph, output): a node of a graph built op by op, as a typed handle, for typed
/// expressions lowered into that graph (weft::lowering over it). The reverse direction is
/// weft::lower(cx, expression), which gives the graph node of a typed expression.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/expr.hpp>
#include <weft/ops/standard.hpp>

namespace weft {

namespace check {
WEFT_DETAIL_TYPE_CHECK(handle_dtype, "weft::handle: the expression's dtype differs from the handle's");
WEFT_DETAIL_DIM_CHECK(handle_rank, "weft::handle: the expression's rank differs from the handle's");
WEFT_DETAIL_DIM_CHECK(handle_dims,
                      "weft::handle: a static dim of the handle differs from the expression's (or that dim is dyn)");
}  // namespace check

namespace detail {

/// An expression behind a function: how it lowers, and its memo.
struct erased_expr {
  explicit erased_expr(lower_fn f) : lower(std::move(f)) {}
  lower_fn lower;
  lowered_memo memo;
};

/// The dims a handle of shape To compares with an expression of shape From: equal pairs
/// where To is dyn or the dims agree, else the offending pair.
template <class To, class From>
constexpr std::array<std::int64_t, 2> handle_dim_conflict() {
  if constexpr (To::rank != From::rank) {
    return {0, 0};  // reported by the rank check
  } else {
    for (std::size_t i = 0; i < To::values.size(); ++i)
      if (To::values[i] >= 0 && To::values[i] != From::values[i]) return {To::values[i], From::values[i]};
    return {0, 0};
  }
}

/// A node's output dtype and shape against T and S: the run-time form of the handle checks.
template <class T, class S>
void check_node_output(const graph& g, output o, std::string_view what) {
  const node& n = g.at(o.node);
  if (o.port < 0 || o.port >= n.num_outputs())
    fail(error_code::invalid_argument, what, ": ", n.describe(), " has ", n.num_outputs(), " outputs, asked for output ",
         o.port);
  dtype got = n.output_dtype(o.port);
  const partial_shape& s = n.output_shape(o.port);
  bool ok = got == dtype_of<T> && (!s.rank_known() || s.rank() == S::rank);
  for (int i = 0; ok && s.rank_known() && i < S::rank; ++i) {
    auto want = S::values[static_cast<std::size_t>(i)];
    ok = want < 0 || s[i] < 0 || s[i] == want;
  }
  if (!ok)
    fail(error_code::invalid_argument, what, ": ", n.describe(), " output ", o.port, " is ", got, s,
         ", which does not fit the handle's ", dtype_of<T>, S::partial());
}

}  // namespace detail

/// An expression of element type T and static shape D... whose expression type is erased (a
/// model built in a runtime loop; see the file's comment). Any expression that fits (same
/// dtype and rank, static dims that agree) converts to it; lowering it lowers the
/// expression once per lowering.
template <element T, std::int64_t... D>
class handle : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = static_shape<D...>;  ///< the static shape (static_shape)

  /// An empty handle: assign an expression before lowering it.
  handle() = default;

  /// Holds e; a dtype, rank or static dim that does not fit is a compile error.
  template <expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, handle>)
  handle(const E& e)  // NOLINT: implicit, as an expression converts to a handle that fits it
      : impl_(std::make_shared<detail::erased_expr>(lowering_of(e))) {
    using ES = shape_of<E>;
    (void)check::handle_dtype<T, value_type_of<E>>::value;
    (void)check::handle_rank<shape_type::rank, ES::rank>::value;
    constexpr auto conflict = detail::handle_dim_conflict<shape_type, ES>();
    (void)check::handle_dims<conflict[0], conflict[1]>::value;
  }

  /// From a lowering function whose node is checked against T and D... (raw_op, wrap).
  explicit handle(lower_fn lower)
      : impl_(std::make_shared<detail::erased_expr>(std::move(lower))) {}

  /// Whether no expression is held.
  bool empty() const noexcept { return impl_ == nullptr; }

  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const {
    if (!impl_)
      fail(error_code::failed_precondition, "weft::handle<", dtype_of<T>, shape_type::partial(),
           ">: lowering an empty handle (assign an expression to it first)");
    return impl_->memo.get(cx, [&] { return impl_->lower(cx); });
  }

 private:
  std::shared_ptr<detail::erased_expr> impl_;
};

/// An operand of raw_op: any expression, whatever its dtype and shape.
class operand {
 public:
  /// Any expression.
  template <expression E>
  operand(const E& e)  // NOLINT: implicit, so that raw_op("Add", {x, y}) reads naturally
      : lower_(lowering_of(e)) {}
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const { return lower_(cx); }

 private:
  lower_fn lower_;
};

/// raw_op<float, dyn, 256>("MatMul", {x, w}, {{"transpose_b", true}}): the node
/// `name`(inputs, attrs), output `port`, built by name in the current name and device
/// scopes. Its op must be registered (the standard ops are) and, to run, have a kernel for
/// its dtypes (include <weft/kernels/cpu/all.hpp> in one file, or register it). When it is
/// lowered, its output's dtype and inferred shape are checked against T and D...; a mismatch
/// is an error naming the node, its dtype and its shape.
template <element T, std::int64_t... D>
handle<T, D...> raw_op(std::string name, std::vector<operand> inputs, attr_map attrs = {}, int port = 0) {
  const scope_info* scope = detail::current_scope();
  return handle<T, D...>([name = std::move(name), inputs = std::move(inputs), attrs = std::move(attrs), port,
                          scope](lowering& cx) {
    WEFT_DETAIL_ONCE(ops::register_standard_ops());
    std::vector<output> in;
    in.reserve(inputs.size());
    for (const auto& i : inputs) in.push_back(i.lower(cx));
    output o = cx.add(name, std::move(in), attrs, scope);
    o.port = port;
    detail::check_node_output<T, static_shape<D...>>(cx.target(), o, "weft::raw_op");
    return o;
  });
}

/// wrap<float, dyn, 10>(g, logits): a node of g (built op by op) as a typed handle, checked
/// now against T and D.... It lowers only into g.
template <element T, std::int64_t... D>
handle<T, D...> wrap(const graph& g, output o) {
  detail::check_node_output<T, static_shape<D...>>(g, o, "weft::wrap");
  return handle<T, D...>([&g, o](lowering& cx) {
    if (&cx.target() != &g)
      fail(error_code::invalid_argument, "weft::wrap: node '", g.at(o.node).name(),
           "' belongs to another graph than the one being lowered into");
    return o;
  });
}

}  // namespace weft

/// @file
/// The DSL's random ops: random_uniform, random_normal, truncated_normal, seeded as
/// TensorFlow's (a graph-level seed and an op seed), stateful: never merged, never folded.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/ops.hpp>
#include <weft/ops/random_ops.hpp>

namespace weft {

// ---- random ---------------------------------------------------------------------------

/// An expression with no operands whose value is computed by its op alone (random numbers).
template <class Op, class T, class S>
class source_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)
  /// The expression of descriptor op, in the name scope current now.
  explicit source_expr(Op op)
      : op_(std::move(op)), scope_(detail::current_scope()), memo_(std::make_shared<detail::lowered_memo>()) {}
  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const {
    return memo_->get(cx, [&] {
      op_.prepare();
      return op_.lower(cx, {}, scope_);
    });
  }

 private:
  Op op_;
  const scope_info* scope_;
  std::shared_ptr<detail::lowered_memo> memo_;
};

#define WEFT_DETAIL_DSL_RANDOM(FN, OP)                                                                    \
  /** `FN<float>(dims<2, 3>, seed, seed2)`: TensorFlow's OP of a static shape, a float type; */           \
  /** seeds 0 and 0 seed the stream from std::random_device, others make it reproducible. */              \
  template <element T, std::int64_t... D>                                                                 \
  auto FN(static_shape<D...>, std::int64_t seed = 0, std::int64_t seed2 = 0) {                            \
    (void)check::random_static<static_shape<D...>::fully_static ? 1 : 0, 1>::value;                       \
    static_assert(detail::in_list<T, float_types>::value, "weft::" #FN ": the dtype must be a float type"); \
    using Op = detail::indexed_op<ops::OP>;                                                               \
    return source_expr<Op, T, static_shape<D...>>(                                                        \
        Op{ops::OP::name, {{0, {D...}}}, {{"dtype", dtype_of<T>}, {"seed", seed}, {"seed2", seed2}}});             \
  }
WEFT_DETAIL_DSL_RANDOM(random_uniform, RandomUniform)
WEFT_DETAIL_DSL_RANDOM(random_normal, RandomStandardNormal)
WEFT_DETAIL_DSL_RANDOM(truncated_normal, TruncatedNormal)
#undef WEFT_DETAIL_DSL_RANDOM

}  // namespace weft

// A gradient through an op without a gradient rule names the op's descriptor. Every op of
// weft's DSL has a rule, so the op here is the program's own: a descriptor lowered to a
// graph node (Identity) for which no rule is declared. The twin declares one
// (weft::detail::has_gradient) and compiles.
#include <weft/dsl.hpp>

#include <utility>
#include <vector>

struct my_clip_op {
  static constexpr bool elementwise = false;
  void prepare() const {}
  weft::output lower(weft::lowering& cx, std::vector<weft::output> inputs, const weft::scope_info* scope) const {
    return cx.add("Identity", std::move(inputs), {}, scope);
  }
};
#ifdef WEFT_COMPILE_FAIL_TWIN
template <>
struct weft::detail::has_gradient<my_clip_op> : std::true_type {};
#endif

void compile_fail_case() {
  auto x = weft::variable<float>("x", weft::dims<4>, 1.0f);
  auto clipped = weft::op_expr<my_clip_op, float, weft::static_shape<4>, decltype(x)>({}, x);
  auto y = weft::reduce_sum(clipped * 2.0f);
  auto d = weft::grad(y, x);
  (void)d;
}

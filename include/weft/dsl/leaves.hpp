/// @file
/// The DSL's leaves: placeholder<T>(name, dims<...>), variable<T>(name, dims<...>, init)
/// and constant(value). Each leaf has an identity (shared by its copies): lowering one twice
/// gives one node, and two leaves built alike give two.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <weft/dsl/expr.hpp>
#include <weft/dsl/tensor_of.hpp>
#include <weft/framework/kernel_for.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft {

namespace detail {

template <std::size_t... I>
static_shape<(static_cast<void>(I), dyn)...> dyn_shape_of(std::index_sequence<I...>);
}  // namespace detail

/// The static shape of rank R with every dim dyn.
template <int R>
using dyn_shape = decltype(detail::dyn_shape_of(std::make_index_sequence<static_cast<std::size_t>(R)>{}));

namespace detail {

struct leaf_data {
  std::string name;
  const scope_info* scope = nullptr;
  tensor value;                                  ///< constants
  lower_fn initializer;  ///< variables: the initial value
  shape dims;            ///< variables whose static shape has dyn dims: the shape at run time
};

}  // namespace detail

/// A placeholder of element type T and static shape S (made by placeholder()).
template <element T, class S>
class placeholder_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)

  /// A placeholder named `name` (its node's name, in the name scope current now).
  explicit placeholder_expr(std::string name)
      : d_(std::make_shared<detail::leaf_data>(detail::leaf_data{std::move(name), detail::current_scope(), {}, {}, {}})) {}

  /// The name given.
  const std::string& name() const noexcept { return d_->name; }

  /// The expression's output in cx's graph, its nodes added there when not yet.
  output lower(lowering& cx) const {
    if (lowering* outer = cx.parent()) return cx.bring(lower(*outer));  // leaves live outside loops and branches
    if (const output* o = cx.find(d_.get())) return *o;
    use_kernels<ops::families::core>();
    auto scope = cx.leaf_scope();
    output o = cx.add("Placeholder", {}, {{"dtype", dtype_of<T>}, {"shape", S::partial()}}, d_->scope, d_->name, false);
    cx.remember(d_.get(), o, d_);
    return o;
  }

 private:
  std::shared_ptr<const detail::leaf_data> d_;
};

/// A value fed at run time: placeholder<float>("x", dims<dyn, 784>).
template <element T, std::int64_t... D>
placeholder_expr<T, static_shape<D...>> placeholder(std::string name, static_shape<D...> = {}) {
  return placeholder_expr<T, static_shape<D...>>(std::move(name));
}

/// A constant of element type T and static shape S (made by constant()).
template <element T, class S>
class constant_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)

  /// A constant holding `value` (whose dtype must be T's).
  explicit constant_expr(tensor value)
      : d_(std::make_shared<detail::leaf_data>(
            detail::leaf_data{{}, detail::current_scope(), std::move(value), {}, {}})) {}

  /// The value.
  const tensor& value() const noexcept { return d_->value; }

  /// Constants merge by value, like any other node.
  output lower(lowering& cx) const {
    if (lowering* outer = cx.parent()) return cx.bring(lower(*outer));  // leaves live outside loops and branches
    use_kernels<ops::families::core>();
    return cx.add("Const", {}, {{"value", d_->value}, {"dtype", dtype_of<T>}}, d_->scope);
  }

 private:
  std::shared_ptr<const detail::leaf_data> d_;
};

/// constant(2.0f): a scalar; constant<float>({1, 2, 3, 4}, dims<2, 2>): a static shape;
/// constant(tensor_of<float, 2>): the tensor's rank, its dims dyn.
template <element T>
constant_expr<T, scalar_shape> constant(T value) {
  return constant_expr<T, scalar_shape>(tensor::scalar(value));
}
/// constant<float>({1, 2, 3, 4}, dims<2, 2>): values in row-major order, a static shape.
template <element T, std::int64_t... D>
constant_expr<T, static_shape<D...>> constant(const std::vector<T>& values, static_shape<D...>) {
  static_assert(static_shape<D...>::fully_static, "weft::constant: the shape of a constant must be fully static");
  return constant_expr<T, static_shape<D...>>(tensor::from_vector(values, shape{D...}));
}
/// constant(tensor_of<float, 2>): the tensor's rank, its dims dyn.
template <element T, int R>
  requires(R >= 0)
constant_expr<T, dyn_shape<R>> constant(const tensor_of<T, R>& value) {
  return constant_expr<T, dyn_shape<R>>(value.untyped());
}

/// A variable of element type T and static shape S (made by variable() and the layers): state
/// kept across runs, with an initializer that initialize() runs.
template <element T, class S>
class variable_expr : public expr_base {
 public:
  using value_type = T;  ///< the element type
  using shape_type = S;  ///< the static shape (static_shape)

  /// A variable named `name` of S's shape (fully static), initialized by the value `init` lowers.
  variable_expr(std::string name, lower_fn init)
      : d_(std::make_shared<detail::leaf_data>(
            detail::leaf_data{std::move(name), detail::current_scope(), {}, std::move(init), {}})) {
    static_assert(S::fully_static, "weft::variable: a variable whose static shape has dyn dims is given its shape");
  }
  /// A variable whose static shape S may have dyn dims (a layer sized at run time): `dims`
  /// is its shape, which must fit S.
  variable_expr(std::string name, shape dims, lower_fn init) {
    bool fits = dims.rank() == S::rank;
    for (int i = 0; fits && i < S::rank; ++i) {
      const std::int64_t want = S::values[static_cast<std::size_t>(i)];
      fits = dims[i] >= 0 && (want < 0 || want == dims[i]);
    }
    if (!fits)
      fail(error_code::invalid_argument, "weft::variable '", name, "': the shape ", dims, " does not fit the static shape ",
           S::partial());
    d_ = std::make_shared<detail::leaf_data>(
        detail::leaf_data{std::move(name), detail::current_scope(), {}, std::move(init), std::move(dims)});
  }

  /// The name given.
  const std::string& name() const noexcept { return d_->name; }
  /// The variable's shape at run time.
  shape runtime_shape() const { return S::fully_static ? shape(std::vector<std::int64_t>(S::values.begin(), S::values.end())) : d_->dims; }

  /// The Variable node; its initializer (an Assign) is recorded in the lowering context.
  output lower(lowering& cx) const {
    if (lowering* outer = cx.parent()) return cx.bring(lower(*outer));  // leaves live outside loops and branches
    if (const output* o = cx.find(d_.get())) return *o;
    use_kernels<ops::families::core>();
    use_kernels<ops::Variable>();
    use_kernels<ops::Assign>();
    const partial_shape declared = S::fully_static ? S::partial() : partial_shape(d_->dims);
    auto scope = cx.leaf_scope();  // its initializer too
    output v = cx.add("Variable", {}, {{"dtype", dtype_of<T>}, {"shape", declared}}, d_->scope, d_->name, false);
    cx.remember(d_.get(), v, d_);
    output init = d_->initializer(cx);
    cx.add_initializer(cx.add("Assign", {v, init}, {}, d_->scope, d_->name + "/init", false).node);
    return v;
  }

 private:
  std::shared_ptr<const detail::leaf_data> d_;
};

namespace detail {
template <class V, class E>
void check_initializer() {
  using VS = typename V::shape_type;
  using ES = shape_of<E>;
  (void)check::variable_init_dtype<value_type_of<V>, value_type_of<E>>::value;
  constexpr std::int64_t n = VS::num_elements, m = ES::fully_static ? ES::num_elements : VS::num_elements;
  // Rank-0 initial values fill the variable; others must have its shape.
  if constexpr (ES::rank != 0) {
    (void)check::variable_init_dims<VS::rank, ES::rank>::value;
    (void)check::variable_init_dims<n, m>::value;
  }
}
}  // namespace detail

/// fill(dims<...>, value), defined with the ops (ops.hpp): a variable's rank-0 initial value
/// fills it.
template <std::int64_t... D, expression V>
auto fill(static_shape<D...>, const V& value);

/// A trainable variable of a fully static shape, with its initial value: a scalar T (every
/// element), a tensor_of<T>, or an expression of the same dtype and shape.
template <element T, std::int64_t... D, class Init>
auto variable(std::string name, static_shape<D...>, const Init& init) {
  using S = static_shape<D...>;
  using V = variable_expr<T, S>;
  (void)check::variable_static<S::fully_static ? 1 : 0, 1>::value;
  if constexpr (expression<Init>) {
    detail::check_initializer<V, Init>();
    // Rank-0 initial values fill the variable.
    if constexpr (shape_of<Init>::rank == 0 && S::rank != 0)
      return V(std::move(name), lowering_of(fill(S{}, init)));
    else
      return V(std::move(name), lowering_of(init));
  } else if constexpr (std::is_arithmetic_v<Init>) {
    return variable<T>(std::move(name), static_shape<D...>{}, constant(static_cast<T>(init)));
  } else {
    static_assert(std::is_same_v<typename Init::value_type, T>,
                  "weft::variable: the initial value's dtype differs from the variable's");
    tensor value = init.untyped();
    if (value.shape() != shape{D...})
      fail(error_code::invalid_argument, "weft::variable '", name, "': the initial value has shape ", value.shape(),
           ", expected ", S::partial());
    return V(std::move(name), lowering_of(constant_expr<T, S>(std::move(value))));
  }
}

}  // namespace weft

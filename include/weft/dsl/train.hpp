/// @file
/// Training typed models: train::minimize(loss, optimizer, vars...) is a target that runs
/// one step of the optimizer (graph/optimizers.hpp: SGD, Momentum, AdaGrad, RMSProp, Adam)
/// on typed variables. The gradients are grad(loss, vars...) (fused backwards included);
/// the updates, slots and their initializers are the graph optimizers' own.
///
///   auto step = weft::train::minimize(loss, weft::train::adam{0.001}, w1, b1, w2, b2);
///   weft::client_session s;
///   s.initialize(step);                       // the variables' and the slots' initial values
///   for (...) s.run(weft::targets(step), weft::feed(x, batch), weft::feed(labels, y));
///
/// At compile time: the loss is a floating-point scalar, every var is a variable (not a
/// placeholder, a constant or an expression), and every op between them has a gradient
/// (grad's check). Hyperparameters are numbers, or scalar expressions through hyper_of:
///
///   auto rate = weft::placeholder<float>("rate", weft::dims<>);
///   auto step = weft::train::minimize(loss, weft::train::adam{weft::train::hyper_of(rate)}, w, b);
///   s.run(weft::targets(step), weft::feed(rate, 0.001f * std::pow(0.6f, epoch)), ...);
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <weft/dsl/gradient.hpp>
#include <weft/graph/optimizers.hpp>
#include <weft/ops/training_ops.hpp>

namespace weft {

namespace check {
WEFT_DETAIL_DIM_CHECK(hyper_rank, "weft::train::hyper_of: a hyperparameter must be a scalar (rank 0)");
WEFT_DETAIL_SUPPORT_CHECK(hyper_dtype, "weft::train::hyper_of: a hyperparameter must be float16, bfloat16, float or double");
WEFT_DETAIL_DIM_CHECK(minimize_loss_rank, "weft::train::minimize: the loss must be a scalar (rank 0); reduce it first");
template <class V, bool Ok>
struct minimize_variable {
  static_assert(Ok, "weft::train::minimize: a var is not a weft::variable (placeholders, constants and expressions "
                    "have no state to update)");
  static constexpr bool value = Ok;
};
}  // namespace check

namespace train {

namespace detail {

template <class V>
struct is_variable : std::false_type {};
template <class T, class S>
struct is_variable<variable_expr<T, S>> : std::true_type {};

/// The update op of the optimizers this library defines.
template <class Optimizer>
struct update_op;
template <>
struct update_op<sgd> {
  using type = ops::ApplyGradientDescent;
};
template <>
struct update_op<momentum> {
  using type = ops::ApplyMomentum;
};
template <>
struct update_op<adagrad> {
  using type = ops::ApplyAdagrad;
};
template <>
struct update_op<rms_prop> {
  using type = ops::ApplyRMSProp;
};
template <>
struct update_op<adam> {
  using type = ops::ApplyAdam;
};

/// Asks for the update kernel of Optimizer for dtype T (every optimizer's, for an optimizer
/// defined elsewhere).
template <class Optimizer, class T>
void register_update_kernel() {
  if constexpr (requires { typename update_op<Optimizer>::type; })
    use_kernels<typename update_op<Optimizer>::type, T>();
  else
    use_kernels<ops::families::training>();
}

/// The lowering a training target is adding its updates to (hyper_of's expressions are
/// lowered there), on this thread.
inline thread_local lowering* training_lowering = nullptr;

/// What a training target lowers: the loss, the variables and their gradients, then
/// apply_gradients, once per lowering.
struct training_state {
  lower_fn loss;
  std::vector<lower_fn> vars, gradients;
  std::function<training_op(graph&, output, const std::vector<output>&, std::vector<output>, const std::string&)> apply;
  void (*prepare)();
  const scope_info* scope;
  weft::detail::memo_per_lowering<output> lowered;

  output get(lowering& cx) {
    return lowered.get(cx, [&] {
      prepare();
      const output l = loss(cx);
      std::vector<output> v, g;
      for (const auto& var : vars) v.push_back(var(cx));
      for (const auto& d : gradients) g.push_back(d(cx));
      // "train", or "train_1", ... when a target of this scope was lowered before.
      const std::string base = scope->prefix + "train";
      std::string name = base;
      for (int k = 1; cx.target().find(name + "/step"); ++k) name = base + "_" + std::to_string(k);
      lowering* const outer = training_lowering;
      training_lowering = &cx;
      struct restore {
        lowering* outer;
        ~restore() { training_lowering = outer; }
      } restored{outer};
      const training_op op = apply(cx.target(), l, v, std::move(g), name);
      cx.add_initializer(op.init.id());
      return output{op.step.id(), 0};  // a NoOp: a target, never fetched
    });
  }
};

}  // namespace detail

/// A target: one step of the optimizer over its variables. Lowering it also records the
/// slots' initializers with the variables' (client_session::initialize runs them).
class training_target {
 public:
  /// The step of the optimizer `state` holds (made by train::minimize).
  explicit training_target(std::shared_ptr<detail::training_state> state) : state_(std::move(state)) {}
  /// The step's node in cx's graph (the gradients and updates added when not yet).
  output lower(lowering& cx) const { return state_->get(cx); }

 private:
  std::shared_ptr<detail::training_state> state_;
};

/// hyper_of(e): a hyperparameter given by a scalar expression (a placeholder fed each step,
/// for a decaying learning rate, or a value computed in the graph), for the optimizers of
/// train::minimize below: train::sgd{train::hyper_of(rate)}. It is lowered with the
/// training step, cast to each variable's dtype where they differ.
template <expression E>
hyper hyper_of(const E& e) {
  using U = value_type_of<E>;
  (void)check::hyper_rank<shape_of<E>::rank, 0>::value;
  (void)check::hyper_dtype<U, weft::detail::differentiable_v<U>>::value;
  return hyper(hyper::maker([e](graph& g, dtype t) -> output {
    lowering* cx = detail::training_lowering;
    if (!cx || &cx->target() != &g)
      fail(error_code::failed_precondition, "weft::train::hyper_of: a hyperparameter given by a typed expression is ",
           "lowered by the DSL's train::minimize; a graph's minimize takes a number or an output of that graph");
    // Of the variable's dtype, so that no Cast node (and kernel) of another pair is needed.
    auto as = [&]<class V>() -> output {
      if constexpr (std::is_same_v<U, V>) return weft::lower(*cx, e);
      else return weft::lower(*cx, cast<V>(e));
    };
    switch (t) {
      case dtype::float16: return as.template operator()<half>();
      case dtype::bfloat16: return as.template operator()<bfloat16>();
      case dtype::float64: return as.template operator()<double>();
      default: return as.template operator()<float>();
    }
  }));
}

/// minimize(loss, optimizer, vars...): see the top of this file.
template <class Optimizer, expression Loss, expression... Vars>
  requires(sizeof...(Vars) >= 1)
training_target minimize(const Loss& loss, const Optimizer& opt, const Vars&... vars) {
  (void)check::minimize_loss_rank<shape_of<Loss>::rank, 0>::value;
  ((void)check::minimize_variable<Vars, detail::is_variable<std::remove_cvref_t<Vars>>::value>::value, ...);
  auto state = std::make_shared<detail::training_state>();
  state->loss = lowering_of(loss);
  (state->vars.push_back(lowering_of(vars)), ...);
  const auto gradients = grad(loss, vars...);  // one expression, or a tuple of them
  if constexpr (sizeof...(Vars) == 1)
    state->gradients.push_back(lowering_of(gradients));
  else
    std::apply([&](const auto&... d) { (state->gradients.push_back(lowering_of(d)), ...); }, gradients);
  state->apply = [opt](graph& g, output l, const std::vector<output>& v, std::vector<output> d, const std::string& name) {
    return apply_gradients(g, l, v, std::move(d), opt, name);
  };
  // The update kernels. The slots' initializers (Fill, Assign) and Adam's beta powers
  // (Mul) find theirs registered by lowering the variables and their gradients.
  state->prepare = [] { (detail::register_update_kernel<Optimizer, value_type_of<Vars>>(), ...); };
  state->scope = weft::detail::current_scope();
  return training_target(std::move(state));
}

/// minimize(loss, optimizer, std::tuple of variables): a layer's or a sequential's
/// variables() (layers::variables(a, b, ...) joins several).
template <class Optimizer, expression Loss, expression... Vars>
  requires(sizeof...(Vars) >= 1)
training_target minimize(const Loss& loss, const Optimizer& opt, const std::tuple<Vars...>& vars) {
  return std::apply([&](const Vars&... v) { return minimize(loss, opt, v...); }, vars);
}

}  // namespace train
}  // namespace weft

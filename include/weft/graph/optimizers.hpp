/// @file
/// Optimizers as graph code (whitepaper §4.1 and §5): minimize() adds the gradients of a
/// loss, one update op per variable (ops/training_ops.hpp) with the optimizer's slots as
/// variables of their own, and returns a target that runs one training step.
///
///   auto train = weft::train::minimize(g, loss, {w1, b1, w2, b2}, weft::train::adam{0.001});
///   session s(g);
///   s.run({init_vars, train.init});        // the model's initializers, then the slots'
///   for (...) s.run(feeds, {loss}, {train.step});
///
/// The updates, the slots and the constants they use are colocated with their variable,
/// whatever device scope minimize() is called in (data-parallel replicas update shared
/// variables where these live). Each update runs after every node of the step that reads its variable, so the forward
/// and backward passes see the values from before the step (the update itself writes in
/// place, copying first when a reader still holds the old value).
///
/// Slots are variables named "<variable>/<optimizer>/<slot>", with the variable's shape and
/// dtype; Adam's beta powers are scalar variables "<name>/beta1_power" and "<name>/beta2_power"
/// of each dtype among the variables. Hyperparameters (train::hyper) are numbers, made
/// constants of the variable's dtype, or scalar tensors of the graph.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/gradients.hpp>
#include <weft/graph/graph.hpp>

namespace weft::train {

/// A hyperparameter: a number (a constant of the variable's dtype) or a scalar tensor of
/// the graph (fed or computed each step: a decaying learning rate, say), or one made when
/// the update is added, of the variable's dtype (the DSL's train::hyper_of(expression)).
/// Adam's beta1 and beta2 are numbers: its beta powers advance by them.
struct hyper {
  /// Makes the hyperparameter's scalar in a graph, of a variable's dtype.
  using maker = std::function<output(graph&, dtype)>;
  double value = 0;                              ///< the number, when neither tensor nor make is set
  std::optional<output> tensor = std::nullopt;  ///< a scalar output of the graph
  maker make;                                    ///< made when the update is added
  /// A number.
  hyper(double v) : value(v) {}            // NOLINT: numbers convert
  /// A scalar output of the graph.
  hyper(output t) : tensor(t) {}           // NOLINT: so do tensors
  /// A node's output 0, a scalar.
  hyper(const node& n) : tensor(n.out(0)) {}  // NOLINT
  /// One made when the update is added.
  explicit hyper(maker m) : make(std::move(m)) {}
};

/// What an optimizer's update sees of one variable.
struct update_args {
  graph& g;          ///< the graph the update is added to
  output var;        ///< the variable (a reference)
  output grad;       ///< its gradient
  std::vector<output> slots;   ///< in the order of slots()
  std::vector<output> shared;  ///< in the order of shared(), for the variable's dtype
  node_options options;        ///< the update's name and control inputs
  /// A scalar constant of the variable's dtype.
  output scalar(double v) const {
    const dtype t = g.at(var).output_dtype(var.port);
    if (!weft::detail::differentiable(t))
      fail(error_code::invalid_argument, "weft::train: variable ", g.at(var).describe(), " has dtype ", t,
           "; optimizers update floating-point variables");
    return g.constant(weft::detail::floating_scalar(t, v)).out(0);
  }
  /// h as a scalar of the variable's dtype (a tensor of another dtype is cast).
  output scalar(const hyper& h) const {
    if (!h.tensor && !h.make) return scalar(h.value);
    const dtype t = g.at(var).output_dtype(var.port);
    const output value = h.tensor ? *h.tensor : h.make(g, t);
    const dtype ht = g.at(value).output_dtype(value.port);
    const auto& s = g.at(value).output_shape(value.port);
    if (s.rank_known() && s.rank() != 0)
      fail(error_code::invalid_argument, "weft::train: a hyperparameter must be a scalar, got ", g.at(value).describe(),
           " of shape ", s);
    return ht == t ? value : g.op("Cast", {value}, {{"DstT", t}}).out(0);
  }
  /// Adds the update node: `op` on `inputs` with `attrs`, named and ordered by `options`.
  output apply(std::string_view op, std::vector<output> inputs, attr_map attrs = {}) const {
    return g.op(op, inputs, std::move(attrs), options).out(0);
  }
};

/// A slot (one per variable) or a shared scalar (one per dtype): its name and initial
/// value; a shared scalar with `advance` is multiplied by it once per step, after every update.
struct slot_spec {
  std::string name;                              ///< "m", "accumulator": the slot's variable is "<var>/<Optimizer>/<name>"
  double initial;                                ///< its initial value
  std::optional<double> advance = std::nullopt;  ///< a shared scalar's factor per step
};

/// Gradient descent: var -= learning_rate * grad. An optimizer is a struct with its
/// hyperparameters, a `name`, the `slots()` it keeps per variable, the scalars it `shared()`
/// per dtype and the `update()` node it adds per variable (minimize() calls them); sgd,
/// momentum, adagrad, rms_prop and adam are TensorFlow's, with its Apply* ops.
struct sgd {
  hyper learning_rate;  ///< the step size
  static constexpr const char* name = "GradientDescent";  ///< the optimizer's name scope
  /// No slots.
  std::vector<slot_spec> slots() const { return {}; }
  /// No shared scalars.
  std::vector<slot_spec> shared() const { return {}; }
  /// ApplyGradientDescent on the variable.
  output update(const update_args& a) const {
    return a.apply("ApplyGradientDescent", {a.var, a.scalar(learning_rate), a.grad});
  }
};

/// accum = momentum * accum + grad; var -= learning_rate * accum (Nesterov: see ApplyMomentum)
struct momentum {
  hyper learning_rate;                  ///< the step size
  hyper momentum = 0.9;                 ///< the accumulator's decay
  bool nesterov = false;                ///< Nesterov's momentum
  static constexpr const char* name = "Momentum";  ///< the optimizer's name scope
  /// The accumulator, from 0.
  std::vector<slot_spec> slots() const { return {{"accumulator", 0.0}}; }
  /// No shared scalars.
  std::vector<slot_spec> shared() const { return {}; }
  /// ApplyMomentum on the variable and its accumulator.
  output update(const update_args& a) const {
    return a.apply("ApplyMomentum", {a.var, a.slots[0], a.scalar(learning_rate), a.grad, a.scalar(momentum)},
                   {{"use_nesterov", nesterov}});
  }
};

/// Adagrad: accum += grad²; var -= learning_rate * grad / sqrt(accum).
struct adagrad {
  hyper learning_rate;               ///< the step size
  double initial_accumulator = 0.1;  ///< the accumulator's initial value (TensorFlow's)
  static constexpr const char* name = "Adagrad";  ///< the optimizer's name scope
  /// The accumulator, from initial_accumulator.
  std::vector<slot_spec> slots() const { return {{"accumulator", initial_accumulator}}; }
  /// No shared scalars.
  std::vector<slot_spec> shared() const { return {}; }
  /// ApplyAdagrad on the variable and its accumulator.
  output update(const update_args& a) const {
    return a.apply("ApplyAdagrad", {a.var, a.slots[0], a.scalar(learning_rate), a.grad});
  }
};

/// RMSProp: ms = decay * ms + (1 - decay) * grad²; mom = momentum * mom + learning_rate *
/// grad / sqrt(ms + epsilon); var -= mom.
struct rms_prop {
  hyper learning_rate;     ///< the step size
  hyper decay = 0.9;       ///< the mean square's decay (TensorFlow's default)
  hyper momentum = 0.0;    ///< the momentum's decay (TensorFlow's default)
  hyper epsilon = 1e-10;   ///< added to the mean square (TensorFlow's default)
  static constexpr const char* name = "RMSProp";  ///< the optimizer's name scope
  /// The mean square (from 1, TensorFlow's) and the momentum (from 0).
  std::vector<slot_spec> slots() const { return {{"ms", 1.0}, {"mom", 0.0}}; }  // TensorFlow's initial values
  /// No shared scalars.
  std::vector<slot_spec> shared() const { return {}; }
  /// ApplyRMSProp on the variable and its slots.
  output update(const update_args& a) const {
    return a.apply("ApplyRMSProp", {a.var, a.slots[0], a.slots[1], a.scalar(learning_rate), a.scalar(decay),
                                    a.scalar(momentum), a.scalar(epsilon), a.grad});
  }
};

/// Adam (Kingma and Ba), as TensorFlow's ApplyAdam: the moments m and v per variable, the
/// bias corrections through beta1^t and beta2^t shared per dtype.
struct adam {
  hyper learning_rate = 0.001;        ///< the step size
  double beta1 = 0.9;                 ///< the first moment's decay
  double beta2 = 0.999;               ///< the second moment's decay
  hyper epsilon = 1e-8;               ///< added to sqrt(v)
  bool nesterov = false;              ///< ApplyAdam's use_nesterov
  static constexpr const char* name = "Adam";  ///< the optimizer's name scope
  /// The first and second moments, from 0.
  std::vector<slot_spec> slots() const { return {{"m", 0.0}, {"v", 0.0}}; }
  /// beta1^t and beta2^t for step t (from 1).
  std::vector<slot_spec> shared() const { return {{"beta1_power", beta1, beta1}, {"beta2_power", beta2, beta2}}; }
  /// ApplyAdam on the variable, its moments and the beta powers.
  output update(const update_args& a) const {
    return a.apply("ApplyAdam", {a.var, a.slots[0], a.slots[1], a.shared[0], a.shared[1], a.scalar(learning_rate),
                                 a.scalar(beta1), a.scalar(beta2), a.scalar(epsilon), a.grad},
                   {{"use_nesterov", nesterov}});
  }
};

/// What minimize() adds: the step to run each iteration, the initializer of the slots, and
/// the gradients.
struct training_op {
  const node& step;               ///< a target: one update of every variable
  const node& init;               ///< a target: sets the optimizer's slots to their initial values
  std::vector<output> gradients;  ///< d loss / d var, one per variable
};

namespace detail {
inline const node& variable_node(const graph& g, output v) {
  const node& n = g.at(v);
  if (n.op() != "Variable")
    fail(error_code::invalid_argument, "weft::train::minimize: ", n.describe(), " is not a variable; minimize updates ",
         "the outputs of Variable nodes");
  if (!n.attr<partial_shape>("shape").fully_known())
    fail(error_code::invalid_argument, "weft::train::minimize: variable ", n.describe(), " has shape ",
         n.attr<partial_shape>("shape"), "; the optimizer's slots need a fully known shape");
  return n;
}
/// A variable of `t` and `s` named `name`, and its initializer (Fill with `value`).
std::pair<output, output> new_variable(graph& g, const std::string& name, dtype t, const shape& s, output value);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::pair<output, output> new_variable(graph& g, const std::string& name, dtype t, const shape& s, output value) {
  output v = g.variable(t, partial_shape(s), node_options(name)).out(0);
  output dims = g.constant(tensor::from_vector(s.dims(), shape{s.rank()})).out(0);
  output init = g.op("Assign", {v, g.op("Fill", {dims, value}).out(0)}, {}, node_options(name + "/init")).out(0);
  return {v, init};
}
#endif
}  // namespace detail

/// Adds to `g` the optimizer's update of each of `vars` by its gradient (gradients[i], of
/// the variable's shape and dtype, computed from `loss`), its slots and their initializers;
/// `name` prefixes the nodes it adds ("train/step", "train/init", ...). minimize() below
/// and the DSL's train::minimize compute the gradients and call it.
template <class Optimizer>
training_op apply_gradients(graph& g, output loss, const std::vector<output>& vars, std::vector<output> gradients,
                            const Optimizer& opt, const std::string& name = "train") {
  for (const auto& v : vars) detail::variable_node(g, v);
  if (gradients.size() != vars.size())
    fail(error_code::invalid_argument, "weft::train::apply_gradients: ", gradients.size(), " gradients for ", vars.size(),
         " variables");
  // The nodes the step runs: ancestors of the loss and the gradients.
  std::vector<char> runs(static_cast<std::size_t>(g.size()));
  std::vector<int> stack{loss.node};
  for (auto d : gradients) stack.push_back(d.node);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (runs[static_cast<std::size_t>(id)]) continue;
    runs[static_cast<std::size_t>(id)] = 1;
    for (const auto& in : g.at(id).inputs()) stack.push_back(in.node);
    for (int c : g.at(id).control_inputs()) stack.push_back(c);
  }
  const int forward_size = g.size();
  std::vector<int> inits, updates;
  std::map<dtype, std::vector<output>> shared;  // per dtype
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const node& vn = g.at(vars[i]);
    // The update, the slots and their constants go with the variable, whatever device scope
    // the caller is in (TensorFlow's colocate_with(var, ignore_existing=True)): a replica's
    // update of a shared variable runs where the variable lives.
    auto anywhere = g.device_scope("");
    auto with_variable = g.colocate_with(vn);
    const dtype t = vn.attr<dtype>("dtype");
    const shape s = vn.attr<partial_shape>("shape").to_shape();
    update_args a{g, vars[i], gradients[i], {}, {}, {}};
    if (!shared.count(t)) {
      auto& sh = shared[t];
      for (const auto& spec : opt.shared()) {
        // Appended, not "_" + std::string(...): g++ 12 warned of an overlapping memcpy (-Wrestrict)
        // in that operator+ at -O2 (a false positive of libstdc++'s inlined insert).
        std::string vname = name + "/" + spec.name;
        if (shared.size() > 1) vname.append("_").append(weft::name(t));
        auto [v, init] = detail::new_variable(g, vname, t, shape{}, a.scalar(spec.initial));
        sh.push_back(v), inits.push_back(init.node);
      }
    }
    a.shared = shared[t];
    for (const auto& spec : opt.slots()) {
      auto [v, init] = detail::new_variable(g, vn.name() + "/" + Optimizer::name + "/" + spec.name, t, s,
                                            a.scalar(spec.initial));
      a.slots.push_back(v), inits.push_back(init.node);
    }
    // After every node of the step that reads the variable.
    std::vector<int> readers;
    for (int id = 0; id < forward_size; ++id)
      if (runs[static_cast<std::size_t>(id)])
        for (const auto& in : g.at(id).inputs())
          if (in.node == vars[i].node) readers.push_back(id);
    a.options = node_options(name + "/" + vn.name() + "/" + Optimizer::name).after(readers);
    updates.push_back(opt.update(a).node);
  }
  // Shared scalars advance once per step, after every update has read them.
  const auto shared_specs = opt.shared();
  std::vector<int> advanced;
  for (auto& [t, sh] : shared)
    for (std::size_t k = 0; k < sh.size(); ++k) {
      if (!shared_specs[k].advance) continue;
      update_args a{g, sh[k], {}, {}, {}, {}};
      output next = g.op("Mul", {sh[k], a.scalar(*shared_specs[k].advance)}).out(0);
      advanced.push_back(g.op("Assign", {sh[k], next}, {}, node_options(g.at(sh[k]).name() + "/advance").after(updates)).id());
    }
  updates.insert(updates.end(), advanced.begin(), advanced.end());
  const node& step = g.op("NoOp", {}, {}, node_options(name + "/step").after(updates));
  return {step, g.op("NoOp", {}, {}, node_options(name + "/init").after(inits)), std::move(gradients)};
}

/// Adds to `g` the gradients of `loss` with respect to `vars` and the optimizer's update of
/// each (apply_gradients).
template <class Optimizer>
training_op minimize(graph& g, output loss, const std::vector<output>& vars, const Optimizer& opt,
                     const std::string& name = "train") {
  for (const auto& v : vars) detail::variable_node(g, v);  // before add_gradients adds nodes
  return apply_gradients(g, loss, vars, add_gradients(g, {loss}, vars), opt, name);
}

}  // namespace weft::train

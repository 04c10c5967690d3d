/// @file
/// client_session: runs typed expressions. It owns a graph; each run lowers its fetches,
/// targets and fed placeholders into that graph (nothing is added when they were lowered
/// before: leaves by identity, other nodes by value) and runs them on a weft::session, which
/// caches one executable per signature.
///
///   weft::client_session s;
///   s.initialize(loss);                                   // lowers loss, runs its variables' initializers
///   auto [l, y] = s.run(weft::fetch(loss, logits), weft::feed(x, batch));
///   s.run(weft::targets(train), weft::feed(x, batch));       // train: an assignment, a group,
///                                                           // train::minimize(...)
#pragma once

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <weft/dsl/fusion.hpp>
#include <weft/dsl/leaves.hpp>
#include <weft/dsl/tensor_of.hpp>
#include <weft/runtime/checkpoint.hpp>
#include <weft/runtime/session.hpp>

namespace weft {

/// Expressions to fetch in one run (made by fetch()).
template <expression... Es>
struct fetch_list {
  std::tuple<Es...> items;  ///< the expressions, in the order their values are returned
};
/// The expressions a run returns, as a tuple of typed tensors.
template <expression... Es>
fetch_list<Es...> fetch(const Es&... es) {
  return {{es...}};
}

/// group(a, b, ...): one NoOp node that runs after a, b, ... (TensorFlow's tf.group): a
/// target standing for all of them. Not an expression (it has no value).
class group_target {
 public:
  /// A target for es.
  template <expression... Es>
  explicit group_target(const Es&... es) : items_{lowering_of(es)...}, scope_(detail::current_scope()) {
    use_kernels<ops::families::core>();  // NoOp's; here, where the kernels are visible, not in lower()
  }
  /// Adds the NoOp (and what it runs after) to cx's graph.
  output lower(lowering& cx) const {
    std::vector<int> controls;
    for (const auto& item : items_) controls.push_back(item(cx).node);
    return cx.add("NoOp", {}, {}, scope_, "group", true, std::move(controls));
  }

 private:
  std::vector<lower_fn> items_;
  const scope_info* scope_;
};
/// group(a, b, ...): see group_target.
template <expression... Es>
group_target group(const Es&... es) {
  return group_target(es...);
}

/// Expressions a run computes for their effects (assignments), and groups; nothing is
/// returned.
struct target_list {
  std::vector<lower_fn> items;  ///< each target's lowering
};
/// Anything that lowers to a node: expressions, groups, training steps (train::minimize).
template <class E>
concept target = requires(const E& e, lowering& cx) {
  { e.lower(cx) } -> std::same_as<output>;
};
/// targets(a, b, ...): what a run computes for its effects only.
template <target... Es>
target_list targets(const Es&... es) {
  return {{lowering_of(es)...}};
}

/// A placeholder's value for one run (made by feed()).
template <class T, class S>
struct feed_item {
  placeholder_expr<T, S> placeholder;  ///< the placeholder fed
  tensor value;                        ///< its value
};

/// feed(x, value): the value of placeholder x for one run. The value's dtype must be x's
/// (checked at compile time); its shape must fit x's static dims (checked at run time).
template <class T, class S, class U, int R>
feed_item<T, S> feed(const placeholder_expr<T, S>& p, const tensor_of<U, R>& value) {
  (void)check::feed_dtype<U, T>::value;
  if constexpr (R >= 0) (void)check::feed_rank<R, S::rank>::value;
  return {p, value.untyped()};
}
/// feed(x, values, shape): x's value from host values, row-major (U must be x's element type).
template <class T, class S, class U>
feed_item<T, S> feed(const placeholder_expr<T, S>& p, const std::vector<U>& values, shape s) {
  (void)check::feed_dtype<U, T>::value;
  return {p, tensor::from_vector(values, std::move(s))};
}
/// feed(x, 0.5f): a scalar placeholder's value (x must be of rank 0).
template <class T, class S, class U>
  requires std::is_arithmetic_v<U>
feed_item<T, S> feed(const placeholder_expr<T, S>& p, U value) {
  (void)check::feed_dtype<U, T>::value;
  (void)check::feed_rank<0, S::rank>::value;
  return {p, tensor::scalar(value)};
}

/// The typed tensor a run returns for expression E: its element type and static rank.
template <expression E>
using result_of = tensor_of<value_type_of<E>, shape_of<E>::rank>;

/// How a client_session runs: its session's options, and whether it fuses elementwise ops.
struct client_options {
  session_options session;  ///< the session's threads, devices and passes
  bool fusion = true;  ///< false: one node per op (for comparison and debugging)
};

/// Runs typed expressions (the DSL's session, like TensorFlow's ClientSession): each run
/// lowers what it has not seen into the session's one graph, then runs it; values come
/// back as typed tensors. Variables are initialized by initialize(); save and restore
/// checkpoint them. run() may be called from several threads at once.
class client_session {
 public:
  /// An empty graph and a session over it.
  explicit client_session(client_options options = {})
      : lowering_(graph_, options.fusion), session_(graph_, std::move(options.session)) {}

  /// One fetch: its typed value.
  template <expression E, class... Feeds>
  result_of<E> run(const E& e, const Feeds&... feeds) {
    return std::get<0>(run(fetch(e), feeds...));
  }

  /// Several fetches: a tuple of typed values (structured bindings work).
  template <expression... Es, class... Feeds>
  std::tuple<result_of<Es>...> run(const fetch_list<Es...>& f, const Feeds&... feeds) {
    return run(f, target_list{}, feeds...);
  }

  /// Runs targets only (a training step, assignments).
  template <class... Feeds>
  void run(const target_list& t, const Feeds&... feeds) {
    run(fetch_list<>{}, t, feeds...);
  }

  /// Fetches and targets in one step: the fetches' values as a tuple.
  template <expression... Es, class... Feeds>
  std::tuple<result_of<Es>...> run(const fetch_list<Es...>& f, const target_list& t, const Feeds&... feeds) {
    std::vector<endpoint> fetches, target_nodes;
    feed_list feed_values;
    {
      std::lock_guard lock(mutex_);
      std::apply([&](const auto&... e) { (fetches.emplace_back(weft::lower(lowering_, e)), ...); }, f.items);
      for (const auto& item : t.items) target_nodes.emplace_back(item(lowering_));
      (feed_values.emplace_back(weft::lower(lowering_, feeds.placeholder), feeds.value), ...);
      sync();
    }
    auto results = session_.run(feed_values, fetches, target_nodes);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<result_of<Es>...>{result_of<Es>::from(std::move(results[I]))...};
    }(std::index_sequence_for<Es...>{});
  }

  /// Lowers `roots` (expressions or targets, and so their variables and an optimizer's
  /// slots), then runs the initializer of every variable lowered so far that has not been
  /// initialized by this call before.
  template <target... Es>
  void initialize(const Es&... roots) {
    std::vector<endpoint> inits;
    {
      std::lock_guard lock(mutex_);
      (roots.lower(lowering_), ...);
      sync();
      const auto& all = lowering_.initializers();
      for (std::size_t i = initialized_; i < all.size(); ++i) inits.emplace_back(output{all[i], 0});
      initialized_ = all.size();
    }
    if (!inits.empty()) session_.run({}, {}, inits);
  }

  /// The graph node an expression lowers to (lowering it if needed), for code that mixes
  /// typed expressions with nodes added by op name.
  template <expression E>
  output lower(const E& e) {
    std::lock_guard lock(mutex_);
    output o = weft::lower(lowering_, e);
    sync();
    return o;
  }

  /// The graph lowered so far.
  const graph& current_graph() const noexcept { return graph_; }
  /// The untyped session underneath (run by node names, traces, record_costs).
  session& untyped() noexcept { return session_; }

  /// Checkpoints (weft::saver's files and rules). save writes the value of every variable
  /// lowered so far, read in one step, to "<prefix>-<step>.ckpt", keeps the newest
  /// `options.keep` of the prefix and returns the file. restore assigns every variable
  /// lowered so far from `file`, all or none: a file that is corrupt, lacks one of them or
  /// holds one with another dtype or shape changes none. Variables are matched by name, so
  /// a fresh client_session that has lowered the same model (by initialize or a run)
  /// restores another's checkpoint.
  /// (Templates only so that the Save and Restore kernels, which a program that never saves
  /// does not compile, are looked up where they are called.)
  template <class Saver = weft::saver>
  std::filesystem::path save(const std::filesystem::path& prefix, std::int64_t step, saver_options options = {}) {
    return saver_for_variables<Saver>(options)->save(session_, prefix, step);
  }
  /// See save.
  template <class Saver = weft::saver>
  void restore(const std::filesystem::path& file) { saver_for_variables<Saver>(std::nullopt)->restore(session_, file); }

 private:
  /// A saver over the variables lowered so far: the last one made while no variable was
  /// lowered since (and, for a save, with the same options; a restore takes any), else a new
  /// one in a name scope of its own.
  template <class Saver = weft::saver>
  std::shared_ptr<const weft::saver> saver_for_variables(std::optional<saver_options> options) {
    std::lock_guard lock(mutex_);
    const std::vector<output> vars = variables_of(graph_);
    if (!saver_ || saved_variables_ != vars.size() || (options && saver_keep_ != options->keep)) {
      const saver_options o = options.value_or(saver_options{});
      auto scope = graph_.name_scope("client_saver_" + std::to_string(savers_made_++));
      saver_ = std::make_shared<const Saver>(graph_, vars, o);
      saved_variables_ = vars.size();
      saver_keep_ = o.keep;
      sync();
    }
    return saver_;
  }

  /// Gives the session the nodes lowered since the last sync, including those a lowering
  /// that failed part way added (they stay, remembered, and later runs may use them).
  void sync() {
    if (graph_.size() != known_) {
      session_.extend(graph_);
      known_ = graph_.size();
    }
  }

  std::mutex mutex_;
  graph graph_;
  lowering lowering_;
  session session_;
  std::size_t initialized_ = 0;
  int known_ = 0;  ///< nodes the session has
  std::shared_ptr<const weft::saver> saver_;
  std::size_t saved_variables_ = 0;  ///< how many variables saver_ covers
  int saver_keep_ = 0;
  int savers_made_ = 0;
};

}  // namespace weft

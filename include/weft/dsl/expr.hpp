/// @file
/// The DSL's core (DESIGN.md §2, layers 1 and 2): expressions that carry their dtype and
/// static shape in their type, and the lowering that turns them into graph nodes.
///
/// An expression is a small value: an op descriptor, its operand expressions, and the
/// name/device scope it was built in. Leaves (placeholders, variables, constants) hold a
/// shared identity, so copies of one variable stay one variable, while two variables built
/// alike stay two. Lowering walks an expression into a graph once per lowering context:
/// leaves are found by identity, and every other node by value (same op, same attrs, same
/// inputs: common subexpression elimination), so lowering the same expression again adds
/// nothing.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <weft/dsl/checks.hpp>
#include <weft/dsl/static_shape.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/cse.hpp>

// Runs its argument once per instantiation of the enclosing code (kernel registrations:
// lowering runs on every session run, and registering takes the registry's lock).
#define WEFT_DETAIL_ONCE(...)                           \
  do {                                                  \
    static const bool weft_once_ = (__VA_ARGS__, true); \
    (void)weft_once_;                                   \
  } while (false)

namespace weft {

class lowering;
using lower_fn = std::function<output(lowering&)>;  ///< lowers one expression (lowering_of)

// ---- scopes --------------------------------------------------------------------------

/// The name prefix, device and colocation in force where an expression is built. Interned
/// (for the program's lifetime), so that an expression carries one pointer.
struct scope_info {
  std::string prefix;  ///< "layer1/" or empty
  std::string device;  ///< "/cpu:0" or empty
  /// Lowers the expression whose node the scope's nodes are colocated with; null: none.
  std::shared_ptr<const lower_fn> colocate;
};

namespace detail {
inline const scope_info* intern_scope(const scope_info& s) {
  static std::mutex mutex;
  static auto* table = new std::deque<scope_info>;  // never destroyed: expressions may outlive main's locals
  std::lock_guard lock(mutex);
  for (const auto& e : *table)
    if (e.prefix == s.prefix && e.device == s.device && e.colocate == s.colocate) return &e;
  table->push_back(s);
  return &table->back();
}
inline const scope_info* root_scope() {
  static const scope_info* root = intern_scope({});
  return root;
}
inline const scope_info*& current_scope() {
  thread_local const scope_info* current = root_scope();
  return current;
}
/// Sets the current scope for the guard's lifetime (per thread).
class scope_guard_base {
 public:
  scope_guard_base(const scope_guard_base&) = delete;
  scope_guard_base& operator=(const scope_guard_base&) = delete;
  ~scope_guard_base() { current_scope() = saved_; }

 protected:
  explicit scope_guard_base(const scope_info& s) : saved_(current_scope()) { current_scope() = intern_scope(s); }

 private:
  const scope_info* saved_;
};
}  // namespace detail

/// { weft::name_scope s("layer1"); auto h = relu(matmul(x, w)); }  names h's nodes
/// "layer1/MatMul", "layer1/Relu"; scopes nest.
class name_scope : detail::scope_guard_base {
 public:
  /// Appends "name/" to the current prefix until the scope ends.
  explicit name_scope(std::string_view name)
      : scope_guard_base({detail::current_scope()->prefix + std::string(name) + "/", detail::current_scope()->device,
                          detail::current_scope()->colocate}) {}
};

/// { weft::device_scope d("/cpu:1"); ... }: expressions built inside request that device.
class device_scope : detail::scope_guard_base {
 public:
  /// Requests `device` for expressions built until the scope ends.
  explicit device_scope(std::string_view device)
      : scope_guard_base({detail::current_scope()->prefix, std::string(device), detail::current_scope()->colocate}) {}
};

// ---- expressions ---------------------------------------------------------------------

struct expr_base {};

template <class E>
concept expression = std::derived_from<std::remove_cvref_t<E>, expr_base> && requires {
  typename std::remove_cvref_t<E>::value_type;
  typename std::remove_cvref_t<E>::shape_type;
};

/// An expression's element type.
template <expression E>
using value_type_of = typename std::remove_cvref_t<E>::value_type;
/// An expression's static shape (a static_shape).
template <expression E>
using shape_of = typename std::remove_cvref_t<E>::shape_type;

// ---- lowering ------------------------------------------------------------------------

/// How a lowering inside a loop's frame or a cond's branch (dsl/control_flow.hpp) takes
/// values from outside it.
class frame_hooks {
 public:
  virtual ~frame_hooks() = default;
  /// `outer`, a value of the enclosing lowering, as seen here (a loop invariant's Enter, or
  /// the branch's side of a Switch).
  virtual output enter(output outer) = 0;
  /// Control inputs for a node with no input, so that it runs here (the loop's or the
  /// branch's pivot).
  virtual std::vector<int> pivot() = 0;
  /// Whether a node whose inputs all come from outside is made outside and entered (a
  /// loop hoists its invariant computations; a branch does not, so that they run only
  /// when it is taken).
  virtual bool hoists() const = 0;
};

/// Lowers expressions into one graph. Owned by a client_session (one per graph). A
/// lowering inside a loop or a branch has a parent: values from outside come in through
/// its hooks, and expressions are lowered anew there (their memos are per lowering).
class lowering {
 public:
  /// The top lowering into g; `fuse`: elementwise subtrees become Fused nodes.
  explicit lowering(graph& g, bool fuse = true)
      : graph_(g), fuse_(fuse), serial_(next_serial()), base_scope_(g.current_name_scope()) {}
  /// A lowering inside a loop's frame or a branch of parent's, values from outside brought in by hooks.
  lowering(lowering& parent, frame_hooks& hooks)
      : graph_(parent.graph_), fuse_(parent.fuse_), serial_(next_serial()), parent_(&parent),
        hooks_(&hooks) {}
  lowering(const lowering&) = delete;
  lowering& operator=(const lowering&) = delete;

  /// The enclosing lowering of a loop's or a branch's; null at the top.
  lowering* parent() const noexcept { return parent_; }

  /// While the guard lives, nodes get the graph's name scope of when the top lowering was
  /// made, not a loop's that is being lowered: a leaf (a variable, a placeholder) is named
  /// the same wherever it is first lowered.
  [[nodiscard]] auto leaf_scope() {
    const lowering* top = this;
    while (top->parent_) top = top->parent_;
    return graph_.absolute_name_scope(top->base_scope_);
  }
  /// o as seen here: itself when made here (or at the top), else entered from outside.
  output bring(output o) {
    if (!parent_ || owned_.count(o.node)) return o;
    auto [it, fresh] = brought_.try_emplace(o);
    if (fresh) {
      const output outer = parent_->bring(o);
      it->second = hooks_->enter(outer);
      owned_.insert(it->second.node);
      outside_[it->second] = o;
    }
    return it->second;
  }
  /// Marks o as made here (a loop variable, a nested loop's Exit).
  void adopt(output o) { owned_.insert(o.node); }
  /// Marks every node `branch` made as made here: a cond's branch runs in this lowering's
  /// frame, so a gradient lowered here that reads the branch's values (dsl/gradient.hpp)
  /// keeps them, rather than entering them as values from outside.
  void adopt_all(const lowering& branch) { owned_.insert(branch.owned_.begin(), branch.owned_.end()); }
  /// Loop variables: bound to their value in the lowering of the loop's condition or body,
  /// and found from nested lowerings (brought in).
  void bind(const void* identity, output o) {
    adopt(o);
    bound_[identity] = o;
  }
  /// The output bound to `identity` here or in an enclosing lowering (brought in), or none.
  std::optional<output> find_bound(const void* identity) {
    if (auto it = bound_.find(identity); it != bound_.end()) return it->second;
    if (!parent_) return std::nullopt;
    auto o = parent_->find_bound(identity);
    return o ? std::optional<output>(bring(*o)) : std::nullopt;
  }

  /// The graph lowered into.
  graph& target() noexcept { return graph_; }
  /// The graph lowered into.
  const graph& target() const noexcept { return graph_; }
  /// Whether elementwise subtrees are fused.
  bool fusion() const noexcept { return fuse_; }
  /// Unique among the program's lowering contexts, including destroyed ones (memo keys).
  std::uint64_t serial() const noexcept { return serial_; }

  /// Adds op(inputs, attrs) named `name` (or the op name) in `scope`, or returns the equal
  /// node added before. Stateful ops (variables, random numbers) are never merged.
  /// `merge` false adds a node of its own (leaves: two placeholders alike stay two).
  /// `controls`: node ids that must run first (control inputs).
  output add(std::string_view op, std::vector<output> inputs, attr_map attrs, const scope_info* scope,
             std::string_view name = {}, bool merge = true, std::vector<int> controls = {}) {
    if (parent_) {
      const op_def* d = op_registry::global().find(op);
      bool inner = false;
      for (const auto& in : inputs) inner = inner || (owned_.count(in.node) > 0 && !outside_.count(in));
      if (!inner && hooks_->hoists() && !(d && d->stateful) && controls.empty()) {
        for (auto& in : inputs)
          if (auto it = outside_.find(in); it != outside_.end()) in = it->second;
        return bring(parent_->add(op, std::move(inputs), std::move(attrs), scope, name, merge));
      }
      for (auto& in : inputs) in = bring(in);
      if (inputs.empty())
        for (int p : hooks_->pivot()) controls.push_back(p);
      const output o = add_here(op, std::move(inputs), std::move(attrs), scope, name, merge, std::move(controls));
      adopt(o);
      return o;
    }
    return add_here(op, std::move(inputs), std::move(attrs), scope, name, merge, std::move(controls));
  }

  /// Adds op(inputs) here as they are: neither hoisted out of the loop nor its inputs entered
  /// (a gradient's loop structure, whose inputs are already in the frames they must be in);
  /// a node without inputs waits on the body's pivot, as add() makes it.
  output add_in_place(std::string_view op, std::vector<output> inputs, attr_map attrs, const scope_info* scope) {
    std::vector<int> controls;
    if (parent_ && inputs.empty())
      for (int p : hooks_->pivot()) controls.push_back(p);
    const output o = add_here(op, std::move(inputs), std::move(attrs), scope, {}, true, std::move(controls));
    adopt(o);
    return o;
  }

 private:
  output add_here(std::string_view op, std::vector<output> inputs, attr_map attrs, const scope_info* scope,
                  std::string_view name, bool merge, std::vector<int> controls) {
    const op_def* def = op_registry::global().find(op);
    merge = merge && def && !def->stateful;
    // The node to colocate with, lowered first (memoized: found again at once).
    std::string colocate = scope->colocate ? graph_.at((*scope->colocate)(*this)).name() : std::string();
    // Equal nodes merge only when they request the same device and colocation.
    // (The table keeps the signature; the node gets its own copies, or the originals when
    // nothing merges.)
    passes::cse_signature signature;
    if (merge) {
      signature = {attrs, scope->device, std::move(colocate), std::move(controls)};
      if (auto id = cse_.find(op, inputs, signature)) return output{*id, 0};
    }
    std::string base = scope->prefix + std::string(name.empty() ? op : name);
    std::string unique = base;
    for (int k = 1; graph_.find(graph_.current_name_scope() + unique); ++k) unique = base + "_" + std::to_string(k);
    node_options options(std::move(unique));
    options.device = scope->device;
    options.colocate_with = merge ? signature.colocate : std::move(colocate);
    options.control_inputs = merge ? signature.controls : std::move(controls);
    const node& n = graph_.op(op, inputs, std::move(attrs), std::move(options));
    if (merge) cse_.insert(op, std::move(inputs), std::move(signature), n.id());
    return output{n.id(), 0};  // port 0 also for nodes without outputs (NoOp), as a target
  }

 public:

  /// Leaves and type-erased handles are lowered once per identity.
  const output* find(const void* identity) const {
    auto it = by_identity_.find(identity);
    return it == by_identity_.end() ? nullptr : &it->second;
  }
  /// Records o as the output of the expression `identity` (find returns it), keeping
  /// `keep_alive` so that the address stays unique.
  void remember(const void* identity, output o, std::shared_ptr<const void> keep_alive) {
    by_identity_.emplace(identity, o);
    keep_alive_.push_back(std::move(keep_alive));
  }

  /// Variable initializers (Assign nodes), in the order their variables were lowered.
  void add_initializer(int node_id) {
    if (parent_) return parent_->add_initializer(node_id);
    initializers_.push_back(node_id);
  }
  /// The initializers recorded (the top lowering's).
  const std::vector<int>& initializers() const noexcept { return initializers_; }

 private:
  graph& graph_;
  bool fuse_;
  passes::cse_table cse_;  ///< graph/passes/cse.hpp
  std::map<const void*, output> by_identity_;
  std::vector<std::shared_ptr<const void>> keep_alive_;  ///< identities stay unique while remembered
  std::vector<int> initializers_;
  std::uint64_t serial_;
  lowering* parent_ = nullptr;
  std::string base_scope_;  ///< a top lowering's: the graph's name scope when it was made
  frame_hooks* hooks_ = nullptr;
  std::set<int> owned_;                  ///< nodes made here (or entered, or bound)
  std::map<output, output> brought_;     ///< outer value -> as seen here
  std::map<output, output> outside_;     ///< an entered value -> the outer value it came from
  std::map<const void*, output> bound_;  ///< loop variables

  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
  }
};

namespace detail {
/// What an expression lowered to (V: an output, or several), per lowering context. Shared by
/// the copies of an expression, so a fetch lowered once is found again in O(1) on the next
/// run; it dies with the last copy (nothing accumulates when expressions are rebuilt in a loop).
template <class V>
class memo_per_lowering {
 public:
  template <class F>
  V get(lowering& cx, F&& lower_once) {
    {
      std::lock_guard lock(mutex_);
      for (const auto& [serial, v] : entries_)
        if (serial == cx.serial()) return v;
    }
    // Not under the lock: lowering the operands takes their memos' locks. One lowering
    // context is used by one thread at a time (client_session holds its mutex).
    V v = lower_once();
    std::lock_guard lock(mutex_);
    entries_.emplace_back(cx.serial(), v);
    return v;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::uint64_t, V>> entries_;
};
using lowered_memo = memo_per_lowering<output>;
}  // namespace detail

/// Every expression type E provides `output lower(lowering&) const`.
template <expression E>
output lower(lowering& cx, const E& e) {
  return e.lower(cx);
}

/// A function lowering (a copy of) e: how handles, targets and scopes hold expressions of
/// any type. (Anything with a lower(lowering&) member: expressions and group targets.)
template <class E>
lower_fn lowering_of(const E& e) {
  return [e](lowering& cx) { return e.lower(cx); };
}

/// { weft::colocate_with c(w); auto u = assign_sub(w, g); }: the nodes of expressions built
/// inside are placed with w's node (its colocation group; TensorFlow's colocate_with). The
/// placement issue honours groups; a device requested inside must match the group's.
class colocate_with : detail::scope_guard_base {
 public:
  /// Places what is built until the scope ends with e's node.
  template <expression E>
  explicit colocate_with(const E& e)
      : scope_guard_base({detail::current_scope()->prefix, detail::current_scope()->device,
                          std::make_shared<const lower_fn>(lowering_of(e))}) {}
};

}  // namespace weft

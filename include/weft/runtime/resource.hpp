/// @file
/// Resources: state that outlives a step (whitepaper §2, "Variables" and "containers").
/// A resource_manager holds named containers; a container holds resources by name:
/// variables, queues (runtime/queue.hpp), mutexes. Two sessions given the same
/// resource_manager share them; reset(container) drops a container's state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/tensor.hpp>

namespace weft {

/// What a container holds: a named piece of state of some kind. Each kind R also names
/// itself as R::kind_name, for errors that name the kind a lookup wanted.
class resource_base {
 public:
  virtual ~resource_base() = default;
  /// The kind, for errors ("variable", "queue", "mutex").
  virtual std::string_view kind() const noexcept = 0;
};

/// A persistent tensor. A value a reader took stays valid and unchanged while other steps
/// assign: assign and update replace the buffer, and update_in_place writes into it only
/// when no reader holds it (copy on write). (Not `variable`: that is the DSL's function.)
class resource_variable final : public resource_base {
 public:
  /// A form of the value that a kernel makes from it and keeps with the variable (derived()).
  struct derived_form {
    virtual ~derived_form() = default;
  };

  static constexpr std::string_view kind_name = "variable";  ///< its kind, in messages
  std::string_view kind() const noexcept override { return kind_name; }
  /// An uninitialized variable of dtype t and shape s.
  resource_variable(dtype t, partial_shape s, std::string name) : dtype_(t), shape_(std::move(s)), name_(std::move(name)) {}

  /// Its dtype.
  dtype element_type() const noexcept { return dtype_; }
  /// The shape it was declared with (an assigned value must fit it).
  const partial_shape& declared_shape() const noexcept { return shape_; }
  /// Its name.
  const std::string& name() const noexcept { return name_; }

  /// Whether a value was assigned.
  bool initialized() const {
    std::shared_lock lock(mutex_);
    return value_.valid();
  }
  /// The current value; an uninitialized variable is a failed precondition.
  tensor value() const {
    std::shared_lock lock(mutex_);
    if (!value_.valid())
      fail(error_code::failed_precondition, "variable '", name_, "' is read before it was initialized");
    return value_;
  }
  /// The number of elements of the current value, 0 before one is assigned: what a kernel
  /// that reads it will take (the executor's placement), without copying the value out.
  std::int64_t num_elements() const {
    std::shared_lock lock(mutex_);
    return value_.valid() ? value_.num_elements() : 0;
  }
  /// Replaces the value (readers keep the one they took).
  void assign(tensor v) {
    std::unique_lock lock(mutex_);
    wrote();
    value_ = std::move(v);
  }
  /// Applies f(old) -> new under the lock: a read-modify-write that concurrent steps cannot tear.
  template <class F>
  tensor update(F&& f) {
    std::unique_lock lock(mutex_);
    if (!value_.valid())
      fail(error_code::failed_precondition, "variable '", name_, "' is updated before it was initialized");
    wrote();
    value_ = f(static_cast<const tensor&>(value_));
    return value_;
  }
  /// Applies f(values) to the values of `vars` (distinct, initialized, each locked for the
  /// call) for writing in place: a value that a reader still holds is copied first (copy on
  /// write), so readers never see a partial update. `vars` are locked in address order, so
  /// two updates of overlapping sets cannot deadlock. f should check its inputs before it
  /// writes: an exception leaves the values it has written.
  /// copy(t): the copy a value still read elsewhere is replaced by (a device of its own
  /// memory copies there); by default a host copy.
  template <class F, class Copy = tensor (*)(const tensor&)>
  static void update_in_place(const std::vector<resource_variable*>& vars, F&& f, Copy copy = &host_copy) {
    std::vector<resource_variable*> order(vars);
    std::sort(order.begin(), order.end());
    if (std::adjacent_find(order.begin(), order.end()) != order.end())
      fail(error_code::invalid_argument, "variable '", (*std::adjacent_find(order.begin(), order.end()))->name_,
           "' is passed twice to one update");
    std::vector<std::unique_lock<std::shared_mutex>> locks;
    locks.reserve(order.size());
    for (resource_variable* v : order) locks.emplace_back(v->mutex_);
    std::vector<tensor*> values;
    for (resource_variable* v : vars) {
      if (!v->value_.valid())
        fail(error_code::failed_precondition, "variable '", v->name_, "' is updated before it was initialized");
      if (!v->value_.sole_owner()) v->value_ = copy(v->value_);
      v->wrote();
      values.push_back(&v->value_);
    }
    f(values);
  }

  /// A form of the value made from it by a kernel (MatMul's packed copy of a weight,
  /// cpu/matmul.hpp's packed_weight) while it is the form of `read`: a value taken from this
  /// variable that is still its value, unwritten since the form was kept (every assign,
  /// update and update_in_place is a write, and drops the form); else null.
  std::shared_ptr<const derived_form> derived(const tensor& read) const {
    std::shared_lock lock(mutex_);
    return is_value(read) ? derived_ : nullptr;
  }
  /// derived(read) for a kernel that reads `read` now, under one lock. When there is none,
  /// `keep_at` is set if `read` was the value at the previous call too, no write between: a
  /// value read a second time is worth a derived form (a weight read by inference's steps),
  /// one read once per write is not (a weight that each training step updates); it is then
  /// the write count that keep_derived expects.
  std::shared_ptr<const derived_form> read_derived(const tensor& read, std::optional<std::uint64_t>& keep_at) {
    std::unique_lock lock(mutex_);
    if (!is_value(read)) return nullptr;
    if (derived_) return derived_;
    if (last_read_ == writes_) keep_at = writes_;
    last_read_ = writes_;
    return nullptr;
  }
  /// Keeps d as the form of `read` (derived()) if read is still the value, unwritten since
  /// read_derived gave `at`.
  void keep_derived(const tensor& read, std::uint64_t at, std::shared_ptr<derived_form> d) {
    std::unique_lock lock(mutex_);
    if (writes_ == at && is_value(read)) derived_ = std::move(d);
  }

 private:
  static tensor host_copy(const tensor& t) { return t.copy(); }
  /// Whether `read` is value_ itself (the buffer, the first element and the shape; the
  /// caller holds the lock).
  bool is_value(const tensor& read) const noexcept {
    return value_.shares_buffer_with(read) && value_.raw_data() == read.raw_data() && value_.shape() == read.shape();
  }
  /// A write: counted, and the derived form dropped.
  void wrote() noexcept {
    ++writes_;
    derived_.reset();
  }

  dtype dtype_;
  partial_shape shape_;
  std::string name_;
  mutable std::shared_mutex mutex_;
  tensor value_;
  std::uint64_t writes_ = 0;                      ///< assigns and updates so far
  std::uint64_t last_read_ = ~std::uint64_t{0};  ///< writes_ at the last read_derived
  std::shared_ptr<derived_form> derived_;        ///< a kernel's form of the value (derived()); dropped by every write
};

/// The state a session keeps across steps (whitepaper §4.6): variables, queues, readers,
/// mutexes, by container and name. Sessions may share one (session_options::resources);
/// thread-safe.
class resource_manager {
 public:
  /// The variable `name` in `container`, created on first use. A second lookup with another
  /// dtype or shape is an error: two graphs disagree about what the variable is.
  std::shared_ptr<resource_variable> lookup_or_create_variable(const std::string& container, const std::string& name,
                                                      dtype t, const partial_shape& s) {
    auto v = lookup_or_create<resource_variable>(container, name, [&] { return std::make_shared<resource_variable>(t, s, name); });
    if (v->element_type() != t || !(v->declared_shape() == s))
      fail(error_code::invalid_argument, "variable '", name, "' in container '", container, "' exists as ",
           v->element_type(), v->declared_shape(), ", not ", t, s);
    return v;
  }
  /// The variable `name` in `container`, or null.
  std::shared_ptr<resource_variable> find_variable(const std::string& container, const std::string& name) const {
    return find<resource_variable>(container, name);
  }

  /// The resource `name` of type R in `container`, made by make() on first use (under the
  /// manager's lock: make() must not use the manager). A resource of another kind under the
  /// name is an error naming both kinds.
  template <class R, class Make>
  std::shared_ptr<R> lookup_or_create(const std::string& container, const std::string& name, Make&& make) {
    std::unique_lock lock(mutex_);
    auto& slot = containers_[container][name];
    if (!slot) {
      std::shared_ptr<R> made = make();
      slot = made;
      return made;
    }
    auto r = std::dynamic_pointer_cast<R>(slot);
    if (!r) mismatch(container, name, *slot, R::kind_name);
    return r;
  }
  /// The resource `name` of type R in `container`, or nullptr when there is none; one of
  /// another kind is an error.
  template <class R>
  std::shared_ptr<R> find(const std::string& container, const std::string& name) const {
    std::shared_lock lock(mutex_);
    auto c = containers_.find(container);
    if (c == containers_.end()) return nullptr;
    auto v = c->second.find(name);
    if (v == c->second.end()) return nullptr;
    auto r = std::dynamic_pointer_cast<R>(v->second);
    if (!r) mismatch(container, name, *v->second, R::kind_name);
    return r;
  }
  /// Drops every resource of `container`; steps still running keep the ones they hold.
  void reset(const std::string& container) {
    std::unique_lock lock(mutex_);
    containers_.erase(container);
  }
  /// How many resources `container` holds.
  std::size_t size(const std::string& container) const {
    std::shared_lock lock(mutex_);
    auto c = containers_.find(container);
    return c == containers_.end() ? 0 : c->second.size();
  }

 private:
  [[noreturn]] static void mismatch(const std::string& container, const std::string& name, const resource_base& held,
                                    std::string_view wanted) {
    fail(error_code::invalid_argument, "resource '", name, "' in container '", container, "' is a ", held.kind(),
         ", not a ", wanted);
  }

  mutable std::shared_mutex mutex_;
  std::map<std::string, std::map<std::string, std::shared_ptr<resource_base>>> containers_;
};

}  // namespace weft

/// @file
/// Kernels: an op's implementation for one device type (whitepaper §2). A kernel object
/// is created once per node when a session builds an executable and may then run in
/// many steps at once, so compute() must not mutate the kernel except through atomics.
///
/// Kernels report bad input by throwing weft::error (weft::fail); the executor adds the
/// node, op, dtypes and shapes to the message and aborts the step.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/tensor.hpp>
#include <weft/graph/graph.hpp>
#include <weft/runtime/device.hpp>
#include <weft/runtime/resource.hpp>

namespace weft {

/// A value flowing on an edge: a tensor, or a variable reference, and whether it is dead
/// (an untaken branch's output; control flow makes use of it).
struct entry {
  tensor value;                             ///< the tensor (empty for a reference)
  std::shared_ptr<resource_variable> ref;  ///< the variable, for a reference edge ("Ref(T)")
  bool dead = false;                        ///< whether the value is dead (an untaken branch's)
  /// Empties it, as a default entry (the tensor keeps its shape's storage: tensor::reset).
  void reset() noexcept {
    value.reset();
    ref.reset();
    dead = false;
  }
};

/// Step cancellation. Async kernels that wait register a callback; cancel() runs each once.
class cancellation_manager {
 public:
  /// Identifies a registered callback (0: none was registered).
  using token = std::uint64_t;
  /// Registers f to run on cancel(); returns its token. Returns 0 (and does not register) when already cancelled.
  token register_callback(std::function<void()> f) {
    std::lock_guard lock(mutex_);
    if (cancelled_) return 0;
    callbacks_.emplace(++next_, std::move(f));
    return next_;
  }
  /// Removes the callback of token t (a waiter that finished first); 0 or an unknown token is a no-op.
  void deregister(token t) {
    std::lock_guard lock(mutex_);
    callbacks_.erase(t);
  }
  /// Cancels the step: runs each registered callback once, outside the lock; later calls do nothing.
  void cancel() {
    std::map<token, std::function<void()>> run;
    {
      std::lock_guard lock(mutex_);
      if (cancelled_) return;
      cancelled_ = true;
      run.swap(callbacks_);
    }
    for (auto& [t, f] : run) f();
  }
  /// Whether cancel() has been called.
  bool cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

 private:
  mutable std::mutex mutex_;
  bool cancelled_ = false;
  token next_ = 0;
  std::map<token, std::function<void()>> callbacks_;
};

/// Tensors that live for one step: what a loop's forward pass keeps for its gradient
/// (AccumulatorPush, AccumulatorPop), keyed by an accumulator's name and an iteration path.
class step_store {
 public:
  /// An accumulator's name and the iteration path (one index per enclosing loop).
  using key = std::pair<std::string, std::vector<std::int64_t>>;
  /// Stores t under k (an empty tensor: the value was dead); a second value under one key is
  /// an error (two pushes in one iteration).
  void put(key k, tensor t) {
    std::lock_guard lock(mutex_);
    auto [it, fresh] = values_.try_emplace(std::move(k), std::move(t));
    if (!fresh) fail(error_code::internal, "accumulator '", it->first.first, "' already holds a value at iteration ", path(it->first.second));
  }
  /// Removes and returns the value under k; none is an error.
  tensor take(const key& k) {
    std::lock_guard lock(mutex_);
    auto it = values_.find(k);
    if (it == values_.end())
      fail(error_code::failed_precondition, "accumulator '", k.first, "' holds no value at iteration ", path(k.second),
           ": the forward loop did not push one in this step");
    tensor t = std::move(it->second);
    values_.erase(it);
    return t;
  }
  /// How many values are held.
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return values_.size();
  }
  /// An iteration path as text for messages: "[0, 3]".
  static std::string path(const std::vector<std::int64_t>& p) {
    std::string s = "[";
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(p[i]);
    }
    return s + "]";
  }

 private:
  mutable std::mutex mutex_;
  std::map<key, tensor> values_;
};

/// What a kernel's compute() sees of one run of its node: the inputs, the outputs to set,
/// the node's attrs, the device with its allocator and intra-op threads, the step's
/// resources, cancellation and store. Made by the executor for each run; a kernel written
/// by a user reads inputs with input(i), makes outputs with allocate_output(i, shape) or
/// set_output(i, t), and reports bad input with weft::fail (docs/extending.md).
class kernel_context {
 public:
  /// A context for node n running on `device`, whose intra-op threads (device.cpu()) its
  /// kernel uses and whose allocator its outputs come from (both asked of the device when
  /// used, so that a kernel that needs neither costs no call).
  kernel_context(const node& n, std::span<entry> inputs, std::span<entry> outputs, const weft::device& device,
                 resource_manager& resources, cancellation_manager& cancellation, std::int64_t step_id,
                 step_store* store = nullptr)
      : node_(n), inputs_(inputs), outputs_(outputs), device_(device), resources_(resources),
        cancellation_(cancellation), step_id_(step_id), store_(store) {}

  /// The node being run (its name, op, attrs and declared output dtypes).
  const weft::node& node() const noexcept { return node_; }
  /// How many inputs the node has (control inputs not counted).
  int num_inputs() const noexcept { return static_cast<int>(inputs_.size()); }
  /// How many outputs the node declares.
  int num_outputs() const noexcept { return static_cast<int>(outputs_.size()); }
  /// Input i's tensor (0-based; i < num_inputs()).
  const tensor& input(int i) const { return inputs_[static_cast<std::size_t>(i)].value; }
  /// Whether input i is dead: only a kernel that runs on dead values sees one (AccumulatorPush).
  bool input_dead(int i) const { return inputs_[static_cast<std::size_t>(i)].dead; }
  /// The variable behind a reference input (declared "Ref(T)" in the op).
  resource_variable& input_ref(int i) const { return *input_ref_shared(i); }
  /// The variable behind reference input i, shared (a kernel that keeps or forwards it);
  /// an internal error when input i is not a reference.
  std::shared_ptr<resource_variable> input_ref_shared(int i) const {
    const auto& r = inputs_[static_cast<std::size_t>(i)].ref;
    if (!r) fail(error_code::internal, "input ", i, " is not a variable reference");
    return r;
  }
  /// The variable that input i's value was read from this step (a weight read by MatMul), or
  /// null: a kernel may keep a form of the value with it (resource_variable::derived).
  resource_variable* input_variable(int i) const { return inputs_[static_cast<std::size_t>(i)].ref.get(); }
  /// The node's attr `key` as T (dtype, std::int64_t, float, bool, std::string, shape,
  /// tensor, or a list of them); a missing attr or another kind is an error naming the node.
  template <class T>
  const T& attr(std::string_view key) const {
    return node_.attr<T>(key);
  }

  /// A fresh output buffer of the node's declared dtype.
  tensor& allocate_output(int i, shape s) {
    auto& e = outputs_[static_cast<std::size_t>(i)];
    e.value = tensor(node_.output_dtype(i), std::move(s), device_.get_allocator());
    return e.value;
  }
  /// Sets output i to t (shared, not copied); t's dtype must be the node's declared one.
  void set_output(int i, tensor&& t) { output_of_dtype(i, t.dtype()) = std::move(t); }
  /// Sets output i to t, shared (assigned: the output's dims keep their storage).
  void set_output(int i, const tensor& t) { output_of_dtype(i, t.dtype()) = t; }
  /// Output `out` holding input `in`'s value, for a kernel that then writes into it:
  /// input `in`'s own buffer when no other handle shares it (the input is moved out: do not
  /// read it afterwards), else a copy. A loop that writes one row of a loop variable per
  /// iteration (TensorScatterUpdate in scan and map_fn) so costs a row, not the variable.
  tensor& forward_input_or_copy(int in, int out) {
    auto& e = inputs_[static_cast<std::size_t>(in)];
    auto& o = outputs_[static_cast<std::size_t>(out)];
    if (e.value.dtype() != node_.output_dtype(out))
      fail(error_code::internal, node_.describe(), ": input ", in, " is ", e.value.dtype(), ", output ", out, " is declared ",
           node_.output_dtype(out));
    // Only a buffer of this device's memory is taken over: a tensor from another device is
    // copied, so that each device's allocator counts what its own nodes hold.
    allocator& mine = device_.get_allocator();
    const allocator* from = e.value.buffer_allocator();
    const bool here = from && &from->underlying() == &mine.underlying();
    if (!e.ref && here && e.value.sole_owner()) o.value = std::exchange(e.value, tensor{});
    else o.value = e.value.copy(mine);
    return o.value;
  }
  /// Marks output i dead, as an untaken branch's (AccumulatorPop of a value that was dead).
  void set_output_dead(int i) { outputs_[static_cast<std::size_t>(i)].dead = true; }
  /// Sets reference output i to variable v (Variable, and ops that forward a reference).
  void set_output_ref(int i, std::shared_ptr<resource_variable> v) { outputs_[static_cast<std::size_t>(i)].ref = std::move(v); }

  /// The device the node runs on (its name, type, allocator, copies to and from the host).
  const weft::device& device() const noexcept { return device_; }
  /// The device's intra-op threads, and the two ways CPU kernels use them.
  const cpu_context& cpu() const noexcept { return device_.cpu(); }
  /// Eigen's device over the intra-op threads, for Eigen Tensor expressions (`.device(...)`).
  const Eigen::ThreadPoolDevice& eigen_device() const { return cpu().eigen_device(); }
  /// Splits [0, n) into blocks over the intra-op threads and calls f(begin, end) for each;
  /// `cost_per_unit` (about the cycles one unit takes) decides how finely, so that a small
  /// n runs inline on the calling thread.
  void parallel_for(std::int64_t n, double cost_per_unit,
                    function_ref<void(std::int64_t, std::int64_t)> f) const {
    cpu().parallel_for(n, cost_per_unit, f);
  }
  /// The session's resources (variables, queues, readers) by container and name.
  resource_manager& resources() const noexcept { return resources_; }
  /// The step's cancellation, for kernels that wait (register a callback that wakes them).
  cancellation_manager& cancellation() const noexcept { return cancellation_; }
  /// The step's id, unique within the session.
  std::int64_t step_id() const noexcept { return step_id_; }
  /// The step's store of tensors (AccumulatorPush and AccumulatorPop).
  step_store& store() const {
    if (!store_) fail(error_code::internal, node_.describe(), ": this kernel runs outside a step (no step store)");
    return *store_;
  }

  /// A context for running another kernel in this one's place (a wrapper that moves some
  /// inputs to host memory, say): the same node, outputs and step, with `inputs`, on `device`.
  kernel_context delegate(std::span<entry> inputs, const weft::device& device) const {
    return kernel_context(node_, inputs, outputs_, device, resources_, cancellation_, step_id_, store_);
  }
  /// The inputs as the executor gave them.
  std::span<entry> input_entries() const noexcept { return inputs_; }

  /// For async kernels: record a failure before calling done.
  void set_error(std::exception_ptr e) { error_ = std::move(e); }
  /// The failure set_error recorded, or null.
  std::exception_ptr error() const { return error_; }

 private:
  /// Output i's tensor, after checking that `t` is the node's declared dtype for it.
  tensor& output_of_dtype(int i, dtype t) {
    if (t != node_.output_dtype(i))
      fail(error_code::internal, "kernel produced ", t, " for output ", i, " declared ", node_.output_dtype(i));
    return outputs_[static_cast<std::size_t>(i)].value;
  }

  const weft::node& node_;
  std::span<entry> inputs_;
  std::span<entry> outputs_;
  const weft::device& device_;
  resource_manager& resources_;
  cancellation_manager& cancellation_;
  std::int64_t step_id_;
  step_store* store_;
  std::exception_ptr error_;
};

/// An op's implementation for one device type. A kernel is made once per node (its
/// constructor reads and checks the node's attrs) and compute() may then run in several
/// steps at once: it must not change the kernel but through atomics.
class op_kernel {
 public:
  virtual ~op_kernel() = default;
  /// Runs the node once: reads ctx's inputs and sets every output, or throws weft::error
  /// (weft::fail), which fails the step with the node, op, dtypes and shapes added.
  virtual void compute(kernel_context& ctx) const = 0;
  /// Async kernels (Recv, Dequeue) return from compute_async at once and call done later,
  /// from any thread, holding no executor thread while they wait.
  virtual bool is_async() const noexcept { return false; }
  /// Runs the node and calls done exactly once, when the outputs are set or after
  /// ctx.set_error; the default runs compute() at once.
  virtual void compute_async(kernel_context& ctx, std::function<void()> done) const {
    try {
      compute(ctx);
    } catch (...) {
      ctx.set_error(std::current_exception());
    }
    done();
  }
};

/// Makes the kernel for a node (its constructor may reject the node's attrs by throwing).
using kernel_factory = std::function<std::unique_ptr<op_kernel>(const node&)>;
/// Why a registered kernel cannot serve node n (empty: it can), asked when nodes are placed,
/// before any kernel is made: a kernel whose constructor refuses some nodes of its op and
/// dtype (attrs it has no code for) says so here, so that soft placement puts those nodes on
/// another device instead of the session failing when it builds the kernel. A kernel class
/// declares it as `static std::string refuses(const node&)`.
using kernel_refusal = std::string (*)(const node&);

/// Kernels by (op, device type) and an optional type constraint: ("T", float32) picks the
/// kernel for nodes whose attr T is float32. Registering the same key twice keeps the first,
/// so kernel headers included in several translation units do not conflict.
class kernel_registry {
 public:
  /// A kernel that serves only nodes whose type attr `attr` is `type`; an empty attr
  /// serves every node of the op.
  struct type_constraint {
    std::string attr;              ///< the type attr's name ("T"), or empty
    dtype type = dtype::invalid;  ///< the dtype that attr must have
  };

  /// Registers `factory` for `op` on `device_type` ("CPU", "GPU") under `constraint`, with the
  /// nodes it refuses (null: none); returns false (and keeps the first) when that key is
  /// already registered.
  bool add(std::string op, std::string device_type, type_constraint constraint, kernel_factory factory,
           kernel_refusal refuses = nullptr) {
    std::unique_lock lock(mutex_);
    auto& list = kernels_[{std::move(op), std::move(device_type)}];
    for (const auto& k : list)
      if (k.constraint.attr == constraint.attr && k.constraint.type == constraint.type) return false;
    list.push_back({std::move(constraint), std::move(factory), refuses});
    return true;
  }

  /// Creates the kernel for `n`, or throws not_found naming the node and what was registered.
  std::unique_ptr<op_kernel> create(const node& n, const std::string& device_type) const {
    {
      std::shared_lock lock(mutex_);
      if (const registration* r = find(n, device_type)) return r->factory(n);
    }
    throw error(error_code::not_found, missing(n, device_type));
  }

  /// Whether `n` finds a kernel on `device_type` that takes it: an empty string when it does,
  /// else why not (the node, its type attrs, and what is registered; or the kernel's refusal).
  std::string missing(const node& n, const std::string& device_type) const {
    kernel_refusal refuses = nullptr;
    {
      std::shared_lock lock(mutex_);
      if (const registration* r = find(n, device_type)) {
        if (!r->refuses) return {};
        refuses = r->refuses;
      }
    }
    if (refuses) {
      const std::string why = refuses(n);  // outside the lock: it may be slow, and it may register
      return why.empty() ? why : n.describe() + ": the " + device_type + " kernel does not take it: " + why;
    }
    std::shared_lock lock(mutex_);
    auto it = kernels_.find({n.op(), device_type});
    std::ostringstream msg;
    msg << n.describe() << ": no " << device_type << " kernel registered";
    for (const auto& [key, value] : n.attrs().entries())
      if (value.kind() == attr_kind::type) msg << ' ' << key << '=' << value;
    if (it != kernels_.end()) {
      msg << " (registered for:";
      for (const auto& k : it->second) msg << ' ' << k.constraint.attr << '=' << k.constraint.type;
      msg << ')';
    } else {
      msg << " (include the op's kernel header, or <weft/kernels/cpu/all.hpp> in one translation unit)";
    }
    return msg.str();
  }

  /// Whether any kernel of `op` is registered on `device_type`.
  bool has(std::string_view op, std::string_view device_type) const {
    std::shared_lock lock(mutex_);
    return kernels_.count({std::string(op), std::string(device_type)}) != 0;
  }

  /// Whether a node of `op` whose type attr `c.attr` is `c.type` finds a kernel on `device_type`.
  bool has(std::string_view op, std::string_view device_type, const type_constraint& c) const {
    std::shared_lock lock(mutex_);
    auto it = kernels_.find({std::string(op), std::string(device_type)});
    if (it == kernels_.end()) return false;
    for (const auto& k : it->second)
      if (k.constraint.attr.empty() || (k.constraint.attr == c.attr && k.constraint.type == c.type)) return true;
    return false;
  }

  /// The process's registry, which the kernel headers' registrations fill and sessions read.
  static kernel_registry& global() {
    static kernel_registry* instance = new kernel_registry;  // never destroyed (see op_registry)
    return *instance;
  }

 private:
  struct registration {
    type_constraint constraint;
    kernel_factory factory;
    kernel_refusal refuses = nullptr;
  };
  /// The registration for `n` on `device_type`, or nullptr; the caller holds mutex_.
  const registration* find(const node& n, const std::string& device_type) const {
    auto it = kernels_.find({n.op(), device_type});
    if (it == kernels_.end()) return nullptr;
    for (const auto& k : it->second) {
      if (k.constraint.attr.empty()) return &k;
      const attr_value* v = n.attrs().find(k.constraint.attr);
      if (v && v->get_if<dtype>() && *v->get_if<dtype>() == k.constraint.type) return &k;
    }
    return nullptr;
  }

  mutable std::shared_mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::vector<registration>> kernels_;
};

/// The kernel_factory of kernel class K: `std::make_unique<K>(n)`.
template <class K>
std::unique_ptr<op_kernel> make_kernel(const node& n) {
  return std::make_unique<K>(n);
}

/// K::refuses where kernel class K declares it (`static std::string refuses(const node&)`),
/// else null: the nodes K's constructor would refuse (kernel_refusal).
template <class K>
constexpr kernel_refusal refusal_of() {
  if constexpr (requires(const node& n) {
                  { K::refuses(n) } -> std::convertible_to<std::string>;
                })
    return &K::refuses;
  else
    return nullptr;
}

/// Registers kernel class K (constructible from const node&) for `op` on the CPU. The factory
/// is a function pointer, so that every K shares one std::function instantiation.
template <class K>
bool register_cpu_kernel(std::string op, kernel_registry::type_constraint constraint = {}) {
  return kernel_registry::global().add(std::move(op), "CPU", std::move(constraint), &make_kernel<K>, refusal_of<K>());
}

}  // namespace weft

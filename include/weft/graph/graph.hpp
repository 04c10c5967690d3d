/// @file
/// graph: the runtime dataflow graph (whitepaper §2). Nodes have a unique name, an op,
/// typed attributes, data inputs `node:port`, control inputs and a requested device.
/// Every node is validated as it is added (known op, inputs, dtypes, attributes, shape
/// rule), so a graph is always well formed; inputs must already exist, which also means
/// no cycles. graph_def import and add_control_input() check for cycles explicitly. The
/// node and what names one are node.hpp; the graph's GraphViz picture is tools/dot.hpp.
#pragma once

#include <algorithm>
#include <charconv>
#include <deque>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/node.hpp>
#include <weft/framework/op_registry.hpp>
#include <weft/framework/shape_context.hpp>
#include <weft/ops/control_flow_ops.hpp>
#include <weft/ops/core_ops.hpp>
#include <weft/ops/standard.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft {

/// A dataflow graph (whitepaper §2): nodes, each an op with attrs, inputs (other nodes'
/// outputs) and control inputs, with ids in the order they were added. Each node is checked when added: its op, input count and dtypes, attrs,
/// and the output shapes its op's shape function infers; a bad node is an error naming it,
/// and the graph is unchanged. Scopes (name, device, colocation, control dependencies)
/// apply to the nodes added while their guards live.
class graph {
 public:
  /// The most entries a list argument sized by an attr may have (Split's num_split outputs,
  /// say): larger counts are an error before any list is built.
  static constexpr std::int64_t max_list_length = std::int64_t{1} << 20;

  graph() { ops::register_core_ops(); }

  /// Adds a node; throws weft::error naming the node when it is not valid.
  const node& op(std::string_view op_name, const std::vector<output>& inputs = {}, attr_map attrs = {},
                 node_options options = {}) {
    std::vector<int> controls = std::move(options.control_inputs);
    for (int c : control_scope_) controls.push_back(c);
    std::string device = options.device.empty() ? device_scope_ : options.device;
    std::string colocate = options.colocate_with.empty() ? colocation_scope_ : options.colocate_with;
    return add_resolved(op_name, inputs, std::move(attrs), std::move(options.name), std::move(controls),
                        std::move(device), std::move(colocate));
  }

  /// Adds nodes described by names, in any order. Rejects unknown ops, inputs naming no
  /// node, duplicate names and cycles. The graph is unchanged when this throws.
  void import(const std::vector<node_spec>& specs);

  /// How many nodes the graph has (ids are 0 to size() - 1, in the order they were added).
  int size() const noexcept { return static_cast<int>(nodes_.size()); }
  /// The node of id `id`; another id is a not_found error.
  const node& at(int id) const {
    if (id < 0 || id >= size()) fail(error_code::not_found, "graph: no node with id ", id);
    return nodes_[static_cast<std::size_t>(id)];
  }
  /// The node whose output o is.
  const node& at(output o) const { return at(o.node); }
  /// The node named `name`, or null.
  const node* find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &nodes_[static_cast<std::size_t>(it->second)];
  }
  /// The node named `name`; none is a not_found error.
  const node& operator[](std::string_view name) const {
    if (auto* n = find(name)) return *n;
    fail(error_code::not_found, "graph: no node named '", name, "'");
  }
  /// Resolves "name" or "name:port".
  output resolve(std::string_view ref) const {
    auto colon = ref.rfind(':');
    int port = 0;
    std::string_view node_name = ref;
    if (colon != std::string_view::npos && colon + 1 < ref.size() &&
        std::all_of(ref.begin() + static_cast<std::ptrdiff_t>(colon) + 1, ref.end(),
                    [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const auto digits = ref.substr(colon + 1);
      if (std::from_chars(digits.data(), digits.data() + digits.size(), port).ec != std::errc())
        fail(error_code::out_of_range, "graph: output port ", digits, " in '", ref, "' is out of range");
      node_name = ref.substr(0, colon);
    }
    const node* n = find(node_name);
    if (!n) fail(error_code::not_found, "graph: no node named '", node_name, "' (in '", ref, "')");
    return n->out(port);
  }
  /// "name:port" of output o.
  std::string name_of(output o) const { return at(o).name() + ":" + std::to_string(o.port); }

  /// Adds a control edge from -> to; throws if it would close a cycle.
  void add_control_input(int to, int from);

  /// Replaces node `id` by a node of op `op_name` with the same name, device and colocation:
  /// a graph pass's rewrite, on its own copy of a graph (passes/fuse_matmul.hpp). Its inputs
  /// and control inputs must be outputs and nodes of smaller ids, so that ids stay in
  /// topological order, and its outputs must have the old node's dtypes, reference kinds and
  /// inferred shapes, which its consumers were checked against. The graph is unchanged when
  /// this throws.
  const node& replace(int id, std::string_view op_name, const std::vector<output>& inputs, attr_map attrs,
                      std::vector<int> controls);
  /// Makes every control input on node `from` one on node `to` (a graph pass that folds
  /// `from` into `to`, which finishes later): each node that waits on `from` must come after
  /// `to`, so that ids stay in topological order. The graph is unchanged when this throws.
  void redirect_control_inputs(int from, int to);

  /// RAII scopes. name_scope("layer1") makes an auto-named MatMul "layer1/MatMul". The
  /// guard restores the scope it replaced when it goes.
  class scope_guard {
   public:
    /// A guard that calls pop when it goes.
    explicit scope_guard(std::function<void()> pop) : pop_(std::move(pop)) {}
    /// Takes other's pop; other then does nothing.
    scope_guard(scope_guard&& other) noexcept : pop_(std::exchange(other.pop_, nullptr)) {}
    scope_guard(const scope_guard&) = delete;
    scope_guard& operator=(const scope_guard&) = delete;
    ~scope_guard() {
      if (pop_) pop_();
    }

   private:
    std::function<void()> pop_;
  };
  /// The prefix name_scope puts before the names of nodes added now ("layer1/" or empty).
  const std::string& current_name_scope() const noexcept { return name_scope_; }
  /// Sets the prefix to `prefix` ("" or a scope with its '/', as current_name_scope()
  /// returned) until the guard goes: for nodes that belong to an outer scope, added while an
  /// inner one is current (the DSL's variables, first lowered inside a loop's body).
  [[nodiscard]] scope_guard absolute_name_scope(std::string prefix) {
    if (!prefix.empty() && prefix.back() != '/')
      fail(error_code::invalid_argument, "graph::absolute_name_scope: '", prefix, "' does not end in '/'");
    auto saved = std::exchange(name_scope_, std::move(prefix));
    return scope_guard([this, saved] { name_scope_ = saved; });
  }
  /// Appends "scope/" to the name prefix of the nodes added while the guard lives (nested
  /// scopes: "outer/inner/MatMul").
  [[nodiscard]] scope_guard name_scope(const std::string& scope) {
    auto saved = name_scope_;
    name_scope_ += scope + "/";
    return scope_guard([this, saved] { name_scope_ = saved; });
  }
  /// The device device_scope asks for the nodes added now (empty: none).
  const std::string& current_device_scope() const noexcept { return device_scope_; }
  /// Nodes added while the guard lives ask for `device` ("/device:GPU:0", "/job:w/task:1"),
  /// unless their node_options name one.
  [[nodiscard]] scope_guard device_scope(const std::string& device) {
    auto saved = device_scope_;
    device_scope_ = device;
    return scope_guard([this, saved] { device_scope_ = saved; });
  }
  /// Nodes added in the scope join n's colocation group (TensorFlow's colocate_with).
  [[nodiscard]] scope_guard colocate_with(const node& n) {
    auto saved = colocation_scope_;
    colocation_scope_ = n.name();
    return scope_guard([this, saved] { colocation_scope_ = saved; });
  }
  /// Nodes added while the guard lives get control inputs from the nodes of `ids` (they run
  /// after them).
  [[nodiscard]] scope_guard control_dependencies(const std::vector<int>& ids) {
    auto saved = control_scope_;
    control_scope_.insert(control_scope_.end(), ids.begin(), ids.end());
    return scope_guard([this, saved] { control_scope_ = saved; });
  }

  /// A Const node holding `value`.
  const node& constant(tensor value, node_options options = {}) {
    auto t = value.dtype();
    return op("Const", {}, {{"value", std::move(value)}, {"dtype", t}}, std::move(options));
  }
  /// A Placeholder of dtype t and shape s (unknown_dim for a dimension fed at run time): a
  /// value each run must feed.
  const node& placeholder(dtype t, partial_shape s, node_options options = {}) {
    return op("Placeholder", {}, {{"dtype", t}, {"shape", std::move(s)}}, std::move(options));
  }
  /// A Variable of dtype t and shape s: state that lives across runs in the session's
  /// resources, set by Assign (an initializer) or restored from a checkpoint.
  const node& variable(dtype t, partial_shape s, node_options options = {}) {
    ops::register_state_ops();
    return op("Variable", {}, {{"dtype", t}, {"shape", std::move(s)}}, std::move(options));
  }

  /// Closes a loop (ops/control_flow_ops.hpp): sets input 1 of `merge`, a Merge built with
  /// its Enter as both inputs, to `next`, the output of a NextIteration of the same dtype and
  /// a compatible shape (the executor checks each value that comes back against the Merge's
  /// shape). This back edge is the one way a graph gets a cycle; every other edge points to
  /// an earlier node.
  void close_loop(int merge, output next);

 private:
  /// replacing >= 0: the node takes the place of node `replacing` (replace()), `name` is its
  /// full name, and its inputs must come before it.
  const node& add_resolved(std::string_view op_name, const std::vector<output>& inputs, attr_map attrs,
                           std::string name, std::vector<int> controls, std::string device,
                           std::string colocate, int replacing = -1);
  void check_colocated_devices(const std::string& who, const std::string& device, const node& root) const {
    if (!device.empty() && !root.device().empty() && device != root.device())
      fail(error_code::invalid_argument, who, ": requests device '", device, "' but is colocated with ",
           root.describe(), ", which requests '", root.device(), "'");
  }
  /// Points every colocated node at its group's root (the first node of a chain that is not
  /// colocated with another); a cycle of colocations is an error.
  void flatten_colocation() {
    for (auto& n : nodes_) {
      std::string root = n.colocation_;
      for (int steps = 0; !root.empty(); ++steps) {
        const std::string& next = (*this)[root].colocation_;
        if (next.empty() || next == root) break;
        if (steps > size()) fail(error_code::invalid_argument, n.describe(), ": colocations form a cycle");
        root = next;
      }
      if (root == n.name_) root.clear();
      if (!root.empty()) check_colocated_devices(n.describe(), n.device_, (*this)[root]);
      n.colocation_ = std::move(root);
    }
  }
  /// `base`, or base_k for the smallest k that the name's counter has not passed and no node
  /// takes: one counter per base name (as TensorFlow's), so the k-th node of one op finds its
  /// name in O(1) amortised, not in k tries.
  std::string unique_name(std::string_view base) {
    std::string candidate(base);
    std::int64_t& counter = name_counters_[candidate];
    while (by_name_.count(candidate)) candidate = std::string(base) + "_" + std::to_string(++counter);
    return candidate;
  }

  std::deque<node> nodes_;
  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, std::int64_t> name_counters_;  ///< unique_name's last suffix per base
  std::string name_scope_;
  std::string device_scope_;
  std::string colocation_scope_;
  std::vector<int> control_scope_;
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void graph::close_loop(int merge, output next) {
  if (merge < 0 || merge >= size()) fail(error_code::out_of_range, "close_loop: no node ", merge);
  node& m = nodes_[static_cast<std::size_t>(merge)];
  if (m.op() != "Merge") fail(error_code::invalid_argument, "close_loop: ", m.describe(), " is not a Merge");
  if (m.num_inputs() != 2 || m.inputs_[0] != m.inputs_[1])
    fail(error_code::invalid_argument, "close_loop: ", m.describe(),
         " must have two inputs, both its Enter (the second is the one set), and not be closed yet");
  if (const node& e = at(m.inputs_[0]); e.op() != "Enter")
    fail(error_code::invalid_argument, "close_loop: ", m.describe(), " closes no loop: its first input comes from ",
         e.describe(), ", not from an Enter");
  const node& n = at(next.node);
  if (n.op() != "NextIteration")
    fail(error_code::invalid_argument, "close_loop: ", n.describe(), " is not a NextIteration (closing ", m.describe(), ")");
  if (n.output_dtype(next.port) != m.input_dtype(0))
    fail(error_code::invalid_argument, "close_loop: the loop variable of ", m.describe(), " enters as ", m.input_dtype(0),
         " and comes back from ", n.describe(), " as ", n.output_dtype(next.port));
  const partial_shape& in = m.output_shape(0);
  if (!ops::shapes_compatible(in, n.output_shape(next.port)))
    fail(error_code::invalid_argument, "close_loop: the loop variable of ", m.describe(), " enters with shape ", in,
         " and comes back from ", n.describe(), " with shape ", n.output_shape(next.port),
         "; a loop variable keeps its shape but for the dims its Enter leaves unknown");
  m.inputs_[1] = next;
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE const node& graph::add_resolved(std::string_view op_name, const std::vector<output>& inputs, attr_map attrs,
                                                           std::string name, std::vector<int> controls, std::string device,
                                                           std::string colocate, int replacing) {
  const op_def* def = op_registry::global().find(op_name);
  if (!def && ops::standard_op_family(op_name) == "control") {  // no kernels to register: always there
    ops::register_control_flow_ops();
    def = op_registry::global().find(op_name);
  }
  std::string full_name = replacing >= 0 ? name
                          : name.empty()   ? unique_name(name_scope_ + std::string(op_name))
                                           : name_scope_ + name;
  const int visible = replacing >= 0 ? replacing : size();  // the nodes an input may come from
  std::string who = "node '" + full_name + "' (" + std::string(op_name) + ")";
  if (!def) {
    auto family = ops::standard_op_family(op_name);
    if (family.empty()) fail(error_code::not_found, who, ": unknown op '", op_name, "' (no op of that name is registered)");
    fail(error_code::not_found, who, ": op '", op_name, "' is one of weft's ", family,
         " ops, which this program has not registered; call ", ops::family_registration_hint(family),
         ", or include <weft/kernels/cpu/all.hpp> in one translation unit for every op and kernel");
  }
  if (replacing < 0 && by_name_.count(full_name))
    fail(error_code::already_exists, who, ": a node named '", full_name, "' already exists");
  if (full_name.find(':') != std::string::npos || full_name.starts_with('^'))
    fail(error_code::invalid_argument, who, ": node names may not contain ':' or start with '^'");
  if (!colocate.empty()) {
    const node* with = find(colocate);
    if (!with) fail(error_code::invalid_argument, who, ": colocate_with names no node ('", colocate, "')");
    if (!with->colocation().empty()) with = &(*this)[with->colocation()];  // groups are flat
    check_colocated_devices(who, device, *with);
    colocate = with->name();
  }

  for (const auto& [key, value] : attrs.entries()) {
    const attr_def* ad = def->find_attr(key);
    if (!ad) fail(error_code::invalid_argument, who, ": unknown attr '", key, "'");
    if (value.kind() != ad->kind) {
      if (ad->kind == attr_kind::real && value.kind() == attr_kind::integer)
        attrs.set(key, static_cast<double>(*value.get_if<std::int64_t>()));
      else
        fail(error_code::invalid_argument, who, ": attr '", key, "' must be ", weft::name(ad->kind), ", got ",
             weft::name(value.kind()));
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].node < 0 || inputs[i].node >= visible || inputs[i].port < 0 ||
        inputs[i].port >= at(inputs[i].node).num_outputs())
      fail(error_code::invalid_argument, who, ": input ", i, " is not an output of this graph");

  // Count inputs per argument; a variadic argument's count comes from its attr or the inputs.
  std::size_t fixed_args = 0;
  const arg_def* variadic = nullptr;
  for (const auto& a : def->inputs) {
    if (a.number_attr.empty() && !a.type_list)
      ++fixed_args;
    else
      variadic = &a;
  }
  if (variadic && !attrs.contains(variadic->type_list ? variadic->type_attr : variadic->number_attr)) {
    if (inputs.size() < fixed_args)
      fail(error_code::invalid_argument, who, ": expects at least ", fixed_args, " inputs, got ", inputs.size());
    if (variadic->type_list) {
      // The list of dtypes is the variadic inputs' dtypes, which precede any fixed inputs after them.
      std::size_t start = 0;
      for (const auto& a : def->inputs) {
        if (&a == variadic) break;
        ++start;
      }
      std::vector<dtype> types;
      for (std::size_t i = start; i < start + inputs.size() - fixed_args; ++i) {
        const node& p = at(inputs[i]);
        types.push_back(p.output_dtype(inputs[i].port));
      }
      attrs.set(variadic->type_attr, std::move(types));
    } else {
      attrs.set(variadic->number_attr, static_cast<std::int64_t>(inputs.size() - fixed_args));
    }
  }
  auto count_of = [&](const arg_def& a) -> std::size_t {
    if (a.type_list) {
      const attr_value* v = attrs.find(a.type_attr);
      if (!v || !v->get_if<std::vector<dtype>>())
        fail(error_code::invalid_argument, who, ": attr '", a.type_attr, "' must be a list of types");
      return v->get_if<std::vector<dtype>>()->size();
    }
    if (a.number_attr.empty()) return 1;
    const attr_value* n = attrs.find(a.number_attr);
    if (!n || !n->get_if<std::int64_t>() || *n->get_if<std::int64_t>() < 0)
      fail(error_code::invalid_argument, who, ": attr '", a.number_attr, "' must be a non-negative int");
    if (*n->get_if<std::int64_t>() > max_list_length)
      fail(error_code::invalid_argument, who, ": attr '", a.number_attr, "' = ", *n->get_if<std::int64_t>(),
           " asks for more than ", max_list_length, " ", a.name, " entries");
    return static_cast<std::size_t>(*n->get_if<std::int64_t>());
  };
  std::size_t expected = 0;
  for (const auto& a : def->inputs) expected += count_of(a);
  std::vector<dtype> in_types;
  std::vector<partial_shape> in_shapes;
  std::vector<const tensor*> in_values;
  for (const auto& in : inputs) {
    const node& p = at(in);
    in_types.push_back(p.output_dtype(in.port));
    in_shapes.push_back(p.output_shape(in.port));
    const node* source = &p;  // a constant that enters a loop as an invariant is still one
    while (source->op() == "Enter" && source->attr<bool>("is_constant")) source = &at(source->inputs()[0]);
    in_values.push_back(source->op() == "Const" ? source->attrs().find("value")->get_if<tensor>() : nullptr);
  }
  auto input_list = [&] {
    std::ostringstream out;
    for (std::size_t i = 0; i < inputs.size(); ++i) out << (i ? ", " : "") << in_types[i] << in_shapes[i];
    return out.str();
  };
  if (inputs.size() != expected)
    fail(error_code::invalid_argument, who, ": expects ", expected, " inputs, got ", inputs.size(), " (",
         input_list(), ")");

  // Input dtypes: fixed ones must match; type attrs are inferred from the first input that uses them.
  std::vector<bool> input_refs;
  std::size_t k = 0;
  for (const auto& a : def->inputs) {
    for (std::size_t j = 0, n = count_of(a); j < n; ++j, ++k) {
      dtype got = in_types[k];
      dtype want = a.fixed;
      if (a.type_list) {
        want = (*attrs.find(a.type_attr)->get_if<std::vector<dtype>>())[j];
      } else if (want == dtype::invalid) {
        if (const attr_value* v = attrs.find(a.type_attr)) {
          if (!v->get_if<dtype>()) fail(error_code::invalid_argument, who, ": attr '", a.type_attr, "' must be a type");
          want = *v->get_if<dtype>();
        } else {
          attrs.set(a.type_attr, got);
          want = got;
        }
      }
      if (got != want)
        fail(error_code::invalid_argument, who, ": input ", k, " '", a.name, "' has dtype ", got, " but ",
             a.type_attr.empty() ? std::string("the op requires ") : a.type_attr + " is ", want, " (inputs: ",
             input_list(), ")");
      if (a.is_ref && !at(inputs[k]).output_is_ref(inputs[k].port))
        fail(error_code::invalid_argument, who, ": input ", k, " '", a.name,
             "' must be a variable reference, got a value from ", at(inputs[k]).describe());
      input_refs.push_back(a.is_ref);
    }
  }
  for (const auto& ad : def->attrs) {
    const attr_value* v = attrs.find(ad.name);
    if (!v) {
      if (!ad.default_value) fail(error_code::invalid_argument, who, ": missing required attr '", ad.name, "'");
      attrs.set(ad.name, *ad.default_value);
      v = attrs.find(ad.name);
    }
    const dtype* t = ad.kind == attr_kind::type ? v->get_if<dtype>() : nullptr;
    if (t && !ad.admits(*t)) {
      if (ad.allowed.empty())
        fail(error_code::invalid_argument, who, ": ", ad.name, " = ", *t, " is not supported (", def->name,
             " takes no strings)");
      std::ostringstream allowed;
      for (std::size_t i = 0; i < ad.allowed.size(); ++i) allowed << (i ? ", " : "") << ad.allowed[i];
      fail(error_code::invalid_argument, who, ": ", ad.name, " = ", *t, " is not supported (allowed: ", allowed.str(),
           ")");
    }
  }
  std::vector<dtype> out_types;
  std::vector<bool> out_refs;
  for (const auto& a : def->outputs) {
    for (std::size_t j = 0, n = count_of(a); j < n; ++j) {
      const dtype t = a.fixed != dtype::invalid ? a.fixed
                      : a.type_list             ? (*attrs.find(a.type_attr)->get_if<std::vector<dtype>>())[j]
                                                : *attrs.find(a.type_attr)->get_if<dtype>();
      out_types.push_back(t);
      out_refs.push_back(a.is_ref);
    }
  }
  for (int c : controls)
    if (c < 0 || c >= visible)
      fail(error_code::invalid_argument, who, ": control input ", c,
           replacing >= 0 ? " does not come before the node it replaces" : " is not a node of this graph");

  shape_context ctx(who, attrs, in_types, in_shapes, in_values, out_types);
  if (def->shape_fn) {
    try {
      def->shape_fn(ctx);
    } catch (const error& e) {
      ctx.rethrow(e);
    }
  }

  node n;
  n.id_ = visible;
  n.name_ = std::move(full_name);
  n.def_ = def;
  n.attrs_ = std::move(attrs);
  n.inputs_ = inputs;
  std::sort(controls.begin(), controls.end());
  controls.erase(std::unique(controls.begin(), controls.end()), controls.end());
  n.control_inputs_ = std::move(controls);
  n.device_ = std::move(device);
  n.colocation_ = std::move(colocate);
  n.input_dtypes_ = std::move(in_types);
  n.input_is_ref_ = std::move(input_refs);
  n.output_dtypes_ = std::move(out_types);
  n.output_shapes_ = ctx.output_shapes();
  n.output_is_ref_ = std::move(out_refs);
  if (replacing >= 0) {
    node& old = nodes_[static_cast<std::size_t>(replacing)];
    if (n.output_dtypes_ != old.output_dtypes_ || n.output_is_ref_ != old.output_is_ref_ ||
        n.output_shapes_ != old.output_shapes_)
      fail(error_code::invalid_argument, who, ": cannot replace ", old.describe(), ": its outputs differ");
    old = std::move(n);
    return old;
  }
  by_name_.emplace(n.name_, n.id_);
  nodes_.push_back(std::move(n));
  return nodes_.back();
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void graph::redirect_control_inputs(int from, int to) {
  at(from);
  const node& target = at(to);
  const auto waits = [from](const node& n) {
    return std::find(n.control_inputs_.begin(), n.control_inputs_.end(), from) != n.control_inputs_.end();
  };
  for (const node& n : nodes_)
    if (waits(n) && n.id_ <= to)
      fail(error_code::invalid_argument, n.describe(), ": waits on node ", from, ", which cannot become ", target.describe(),
           ": it does not come before it");
  for (node& n : nodes_) {
    if (!waits(n)) continue;
    for (int& c : n.control_inputs_)
      if (c == from) c = to;
    std::sort(n.control_inputs_.begin(), n.control_inputs_.end());
    n.control_inputs_.erase(std::unique(n.control_inputs_.begin(), n.control_inputs_.end()), n.control_inputs_.end());
  }
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE const node& graph::replace(int id, std::string_view op_name, const std::vector<output>& inputs,
                                                      attr_map attrs, std::vector<int> controls) {
  const node& old = at(id);
  return add_resolved(op_name, inputs, std::move(attrs), old.name(), std::move(controls), old.device(), old.colocation(), id);
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void graph::add_control_input(int to, int from) {
  const node& dst = at(to);
  at(from);
  // from -> to closes a cycle when `to` is already an ancestor of `from`.
  std::vector<int> stack{from};
  std::vector<bool> seen(static_cast<std::size_t>(size()));
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (id == to)
      fail(error_code::invalid_argument, dst.describe(), ": control input from ", at(from).describe(),
           " would create a cycle");
    if (seen[static_cast<std::size_t>(id)]) continue;
    seen[static_cast<std::size_t>(id)] = true;
    for (auto in : at(id).inputs()) stack.push_back(in.node);
    for (int c : at(id).control_inputs()) stack.push_back(c);
  }
  auto& controls = nodes_[static_cast<std::size_t>(to)].control_inputs_;
  if (std::find(controls.begin(), controls.end(), from) == controls.end()) controls.push_back(from);
}
#endif

/// Node `n` of `g` by names (what graph::import takes back): its inputs as "node:port", its
/// control inputs as "^node", its device and colocation. With `kept` (by node id), control
/// inputs from nodes not kept, and a colocation with one, are left out: a spec for a subgraph.
node_spec spec_of(const graph& g, const node& n, const std::vector<bool>* kept = nullptr);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE node_spec spec_of(const graph& g, const node& n, const std::vector<bool>* kept) {
  auto is_kept = [&](int id) { return !kept || (*kept)[static_cast<std::size_t>(id)]; };
  node_spec s{n.name(), n.op(), {}, n.attrs(), n.device(), {}};
  for (const output& in : n.inputs()) s.inputs.push_back(g.name_of(in));
  for (int c : n.control_inputs())
    if (is_kept(c)) s.inputs.push_back("^" + g.at(c).name());
  if (const node* with = n.colocation().empty() ? nullptr : g.find(n.colocation()); with && is_kept(with->id()))
    s.colocate_with = n.colocation();
  return s;
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void graph::import(const std::vector<node_spec>& specs) {
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto& s = specs[i];
    if (s.name.empty()) fail(error_code::invalid_argument, "node ", i, " of the specs (", s.op, ") has an empty name");
    if (!index.emplace(s.name, i).second || find(s.name))
      fail(error_code::already_exists, "node '", s.name, "' (", s.op, "): a node named '", s.name,
           "' already exists");
  }
  auto source_of = [&](const node_spec& s, std::string ref) {
    if (ref.starts_with('^')) ref.erase(0, 1);
    auto colon = ref.rfind(':');
    auto name = colon == std::string::npos ? ref : ref.substr(0, colon);
    if (!index.count(name) && !find(name))
      fail(error_code::invalid_argument, "node '", s.name, "' (", s.op, "): input '", ref, "' names no node");
    return name;
  };
  // A loop's back edge: input 1 of a Merge naming a NextIteration of the specs. The Merge is
  // added with its input 0 twice and closed (close_loop) once every node exists.
  auto back_edge = [&](const node_spec& s, std::size_t k) {
    if (s.op != "Merge" || k != 1 || s.inputs[k].starts_with('^')) return false;
    auto it = index.find(source_of(s, s.inputs[k]));
    return it != index.end() && specs[it->second].op == "NextIteration";
  };
  // Depth-first topological order, with an explicit stack (a chain of a million nodes must
  // not overflow the call stack); a node met again while on the stack closes a cycle.
  std::vector<int> state(specs.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::size_t> order;
  std::vector<std::pair<std::size_t, std::size_t>> stack;  // (spec, next input to visit)
  for (std::size_t root = 0; root < specs.size(); ++root) {
    if (state[root] != 0) continue;
    state[root] = 1;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      if (k == specs[i].inputs.size()) {
        state[i] = 2;
        order.push_back(i);
        stack.pop_back();
        continue;
      }
      const std::size_t input = k++;
      if (back_edge(specs[i], input)) continue;
      auto it = index.find(source_of(specs[i], specs[i].inputs[input]));
      if (it == index.end() || state[it->second] == 2) continue;
      const std::size_t j = it->second;
      if (state[j] == 1)
        fail(error_code::invalid_argument, "node '", specs[j].name, "' (", specs[j].op, "): is part of a cycle",
             " (a loop's one back edge is input 1 of a Merge, from a NextIteration)");
      state[j] = 1;
      stack.emplace_back(j, 0);
    }
  }

  graph staged = *this;  // all or nothing
  std::vector<std::pair<int, std::string>> loops;  // (Merge, its NextIteration input)
  for (std::size_t i : order) {
    const auto& s = specs[i];
    std::vector<output> inputs;
    std::vector<int> controls;
    for (std::size_t k = 0; k < s.inputs.size(); ++k) {
      const auto& ref = s.inputs[k];
      if (ref.starts_with('^'))
        controls.push_back(staged[ref.substr(1)].id());
      else if (back_edge(s, k) && !inputs.empty())
        inputs.push_back(inputs.front());
      else
        inputs.push_back(staged.resolve(ref));
    }
    auto saved_scope = std::exchange(staged.name_scope_, std::string());
    const node& added = staged.add_resolved(s.op, inputs, s.attrs, s.name, std::move(controls), s.device, {});
    staged.name_scope_ = saved_scope;
    if (s.op == "Merge" && s.inputs.size() > 1 && back_edge(s, 1)) loops.emplace_back(added.id(), s.inputs[1]);
  }
  std::vector<bool> back_edges(static_cast<std::size_t>(staged.size()));
  for (const auto& [merge, next] : loops) {
    const output o = staged.resolve(next);
    staged.close_loop(merge, o);
    back_edges[static_cast<std::size_t>(o.node)] = true;
  }
  // A NextIteration returns a value to the start of its loop: one that is no Merge's back
  // edge is outside any loop.
  for (const auto& s : specs)
    if (const node& n = staged[s.name]; s.op == "NextIteration" && !back_edges[static_cast<std::size_t>(n.id())])
      fail(error_code::invalid_argument, n.describe(), ": is not inside a loop (no Merge takes it as input 1, the loop's back edge)");
  // Colocation after all nodes exist: a node may be colocated with one that consumes it.
  for (const auto& s : specs) {
    if (s.colocate_with.empty()) continue;
    if (!staged.find(s.colocate_with))
      fail(error_code::invalid_argument, staged[s.name].describe(), ": colocate_with names no node ('",
           s.colocate_with, "')");
    staged.nodes_[static_cast<std::size_t>(staged[s.name].id())].colocation_ = s.colocate_with;
  }
  staged.flatten_colocation();
  *this = std::move(staged);
}
#endif

}  // namespace weft

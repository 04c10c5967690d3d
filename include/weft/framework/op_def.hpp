/// @file
/// op_def: what the registry knows of an op before any kernel exists: its inputs and
/// outputs, its attributes, statefulness, cost class, and its dtype and shape rule.
///
/// Declared with TensorFlow's REGISTER_OP spelling, parsed once at registration:
///   op_def_builder("MatMul").input("a: T").input("b: T").output("product: T")
///       .attr("T: {float32, float64}").attr("transpose_a: bool = false")
///   input/output:  "name: T" (a type attr), "name: int32" (a fixed dtype),
///                  "name: N * T" (N tensors), "name: Ref(T)" (a variable reference)
///   attr:          "name: kind [= default]" with kind one of int, float, bool, string,
///                  type, shape, tensor, list(int), list(float), list(type), list(shape),
///                  list(string); or "T: {dtype, ...}" for a type attr limited to those.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <weft/core/dtype.hpp>
#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/core/shape.hpp>
#include <weft/framework/attr.hpp>

namespace weft {

/// One input or output of an op, as its spec declares it ("x: T", "y: float32",
/// "values: N * T", "ref: Ref(T)", "args: Tin").
struct arg_def {
  std::string name;  ///< the argument's name
  dtype fixed = dtype::invalid;  ///< set when the dtype is fixed
  std::string type_attr;         ///< else the type attr that names it
  std::string number_attr;       ///< set for "N * T": the int attr counting the tensors
  bool is_ref = false;           ///< "Ref(T)": a variable reference, not a value
  bool type_list = false;        ///< "name: Tin" with Tin a list(type): one tensor per listed dtype
};

/// One attr of an op, as its spec declares it ("T: {float32, float64} = float32",
/// "N: int", "transpose_a: bool = false", "T: any type").
struct attr_def {
  std::string name;                          ///< the attr's name
  attr_kind kind = attr_kind::integer;       ///< what it holds
  std::optional<attr_value> default_value;  ///< the value when a node gives none (none: required)
  std::vector<dtype> allowed;  ///< for type attrs: empty means any plain dtype (bool, the numbers)
  bool admits_string = false;  ///< "T: any type": string too, besides any plain dtype

  /// The dtypes this type attr admits.
  std::vector<dtype> admitted() const {
    if (!allowed.empty()) return allowed;
    std::vector<dtype> all;
    for (int i = 1; i < plain_dtype_count; ++i) all.push_back(static_cast<dtype>(i));
    if (admits_string) all.push_back(dtype::string);
    return all;
  }
  /// Whether this type attr admits t.
  bool admits(dtype t) const {
    if (!allowed.empty()) return std::find(allowed.begin(), allowed.end(), t) != allowed.end();
    return is_plain(t) || (admits_string && t == dtype::string);
  }
};

class shape_context;
class attr_map;

/// What an op's cost rule reads (graph/passes/cost_model.hpp): its attributes and the dims of
/// its inputs and outputs, every dim known (where the graph leaves one open, the cost model's
/// guess stands in), as doubles so that products of dims cannot overflow.
struct op_cost_args {
  const attr_map& attrs;                             ///< the node's attrs
  const std::vector<std::vector<double>>& inputs;   ///< each input's dims
  const std::vector<std::vector<double>>& outputs;  ///< each output's dims

  /// The product of `dims` (1 for a scalar).
  static double elements(const std::vector<double>& dims) noexcept {
    double n = 1;
    for (double d : dims) n *= d;
    return n;
  }
  /// Dim i of input k, counted from the end when i is negative; 0 when there is no such dim.
  double input_dim(std::size_t k, int i) const noexcept { return dim(inputs, k, i); }
  /// Dim i of output k, as input_dim.
  double output_dim(std::size_t k, int i) const noexcept { return dim(outputs, k, i); }

 private:
  static double dim(const std::vector<std::vector<double>>& all, std::size_t k, int i) noexcept {
    if (k >= all.size()) return 0;
    const auto& d = all[k];
    const auto rank = static_cast<int>(d.size());
    if (i < 0) i += rank;
    return i >= 0 && i < rank ? d[static_cast<std::size_t>(i)] : 0;
  }
};

/// An op's part in control flow: the executor runs these ops itself, with no kernel.
enum class flow : std::uint8_t { plain, switch_, merge, enter, exit, next_iteration, loop_cond };

/// An op (whitepaper §2): its name, inputs, outputs, attrs, properties and shape function.
/// Made with op_def_builder and registered once in op_registry; nodes refer to it.
struct op_def {
  std::string name;              ///< the op's name ("MatMul")
  std::vector<arg_def> inputs;   ///< the inputs, in order
  std::vector<arg_def> outputs;  ///< the outputs, in order
  std::vector<attr_def> attrs;   ///< the attrs
  bool stateful = false;  ///< never merged by CSE, never constant-folded
  bool cheap = false;     ///< always run inline by the executor, whatever the tensor sizes
  /// What the runtime and the passes do with the op besides running its kernel, so that
  /// they never test op names:
  flow control = flow::plain;       ///< a control-flow op (Switch, Merge, Enter, Exit, ...)
  bool feed = false;                ///< its value is fed to run(), where no kernel runs (Placeholder)
  bool constant = false;            ///< its output is its `value` attr (Const): constant folding starts there
  bool variable = false;            ///< a variable (Variable): what checkpoints save and restore
  bool runs_on_dead_value = false;  ///< runs when a value it reads is dead, but for its key (AccumulatorPush)
  /// Infers the outputs' shapes from the inputs' and the attrs, and checks them (a wrong
  /// shape is an error naming the node); unset: every output's shape is unknown.
  std::function<void(shape_context&)> shape_fn;
  /// The arithmetic operations one run does, for the cost model; unset: one per element of
  /// its largest input or output (elementwise ops, reductions, copies).
  std::function<double(const op_cost_args&)> flops_fn;

  /// The attr named n, or null.
  const attr_def* find_attr(std::string_view n) const {
    for (const auto& a : attrs)
      if (a.name == n) return &a;
    return nullptr;
  }
};

namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

inline bool is_dtype_name(std::string_view s) {
  for (int i = 1; i < dtype_count; ++i)
    if (name(static_cast<dtype>(i)) == s) return true;
  return false;
}

arg_def parse_arg(std::string_view op, std::string_view spec);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE arg_def parse_arg(std::string_view op, std::string_view spec) {
  auto colon = spec.find(':');
  if (colon == std::string_view::npos)
    fail(error_code::invalid_argument, "op_def ", op, ": argument spec '", spec, "' has no ':'");
  arg_def a;
  a.name = std::string(trim(spec.substr(0, colon)));
  auto type = trim(spec.substr(colon + 1));
  if (auto star = type.find('*'); star != std::string_view::npos) {
    a.number_attr = std::string(trim(type.substr(0, star)));
    type = trim(type.substr(star + 1));
  }
  if (type.starts_with("Ref(") && type.ends_with(")")) {
    a.is_ref = true;
    type = trim(type.substr(4, type.size() - 5));
  }
  if (is_dtype_name(type))
    a.fixed = parse_dtype(type);
  else
    a.type_attr = std::string(type);
  return a;
}
#endif

/// The number `text` holds, whole, else nullopt.
template <class T>
std::optional<T> parse_number(std::string_view text) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

attr_value parse_default(std::string_view op, attr_kind kind, std::string_view text);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE attr_value parse_default(std::string_view op, attr_kind kind, std::string_view text) {
  std::string s(text);
  switch (kind) {
    case attr_kind::integer:
      if (auto v = parse_number<std::int64_t>(s)) return attr_value(*v);
      break;
    case attr_kind::real:
      if (auto v = parse_number<double>(s)) return attr_value(*v);
      break;
    case attr_kind::boolean:
      if (s == "true" || s == "false") return attr_value(s == "true");
      break;
    case attr_kind::string:
      if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') return attr_value(s.substr(1, s.size() - 2));
      break;
    case attr_kind::type: return attr_value(parse_dtype(s));
    case attr_kind::int_list:  // "[]" or "[1, 2, 3]"
      if (s.size() >= 2 && s.front() == '[' && s.back() == ']') {
        std::vector<std::int64_t> v;
        std::string_view body = trim(std::string_view(s).substr(1, s.size() - 2));
        bool ok = true;
        while (ok && !body.empty()) {
          auto comma = body.find(',');
          auto x = parse_number<std::int64_t>(trim(body.substr(0, comma)));
          if (!(ok = x.has_value())) break;
          v.push_back(*x);
          if (comma == std::string_view::npos) break;
          body = body.substr(comma + 1);
        }
        if (ok) return attr_value(std::move(v));
      }
      break;
    case attr_kind::real_list:  // only empty: "[]"
      if (s == "[]") return attr_value(std::vector<double>{});
      break;
    case attr_kind::type_list:
      if (s == "[]") return attr_value(std::vector<dtype>{});
      break;
    case attr_kind::shape_list:
      if (s == "[]") return attr_value(std::vector<partial_shape>{});
      break;
    case attr_kind::string_list:
      if (s == "[]") return attr_value(std::vector<std::string>{});
      break;
    default: break;
  }
  fail(error_code::invalid_argument, "op_def ", op, ": cannot parse default '", text, "' for a ", name(kind),
       " attr");
}
#endif

attr_def parse_attr(std::string_view op, std::string_view spec);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE attr_def parse_attr(std::string_view op, std::string_view spec) {
  auto colon = spec.find(':');
  if (colon == std::string_view::npos)
    fail(error_code::invalid_argument, "op_def ", op, ": attr spec '", spec, "' has no ':'");
  attr_def a;
  a.name = std::string(trim(spec.substr(0, colon)));
  auto rest = trim(spec.substr(colon + 1));
  std::string_view deflt;
  if (auto eq = rest.find('='); eq != std::string_view::npos) {
    deflt = trim(rest.substr(eq + 1));
    rest = trim(rest.substr(0, eq));
  }
  if (rest == "any type") {  // every dtype, string included
    a.kind = attr_kind::type;
    a.admits_string = true;
  } else if (rest.starts_with("{")) {
    a.kind = attr_kind::type;
    auto body = rest.substr(1, rest.size() - 2);
    while (!body.empty()) {
      auto comma = body.find(',');
      a.allowed.push_back(parse_dtype(trim(body.substr(0, comma))));
      if (comma == std::string_view::npos) break;
      body = body.substr(comma + 1);
    }
  } else {
    static constexpr attr_kind kinds[] = {
        attr_kind::integer,  attr_kind::real,      attr_kind::boolean,   attr_kind::string,
        attr_kind::type,     attr_kind::shape,     attr_kind::tensor,    attr_kind::int_list,
        attr_kind::real_list, attr_kind::type_list, attr_kind::shape_list, attr_kind::string_list};
    auto it = std::find_if(std::begin(kinds), std::end(kinds), [&](attr_kind k) { return rest == name(k); });
    if (it == std::end(kinds)) fail(error_code::invalid_argument, "op_def ", op, ": unknown attr kind '", rest, "'");
    a.kind = *it;
  }
  if (!deflt.empty()) a.default_value = parse_default(op, a.kind, deflt);
  return a;
}
#endif

}  // namespace detail

/// Builds an op_def from TensorFlow-style specs (docs/extending.md):
/// `op_def_builder("Scale").input("x: T").output("y: T").attr("T: {float32, float64}")
/// .attr("factor: float = 1").shape_fn(...).build()`. A spec that does not parse is an
/// invalid_argument error naming the op.
class op_def_builder {
 public:
  /// An op named `name`, with no arguments or attrs yet.
  explicit op_def_builder(std::string name) { def_.name = std::move(name); }
  /// Adds an input: "name: T" (a type attr), "name: float32" (a fixed dtype), "name: N * T"
  /// (N tensors), "name: Ref(T)" (a variable reference), "name: Tin" (a list(type) attr).
  op_def_builder& input(std::string_view spec) {
    def_.inputs.push_back(detail::parse_arg(def_.name, spec));
    return *this;
  }
  /// Adds an output, spelled as an input is.
  op_def_builder& output(std::string_view spec) {
    def_.outputs.push_back(detail::parse_arg(def_.name, spec));
    return *this;
  }
  /// Adds an attr: "name: KIND [= default]" with KIND int, float, bool, string, type, shape,
  /// tensor, list(int), list(float), list(type), list(shape) or list(string); "name:
  /// {float32, int32}" (a type attr of those dtypes), "name: any type" (string too).
  op_def_builder& attr(std::string_view spec) {
    def_.attrs.push_back(detail::parse_attr(def_.name, spec));
    return *this;
  }
  /// An attr with a default the spec cannot spell (a tensor's, say): `spec` has no "= ...".
  op_def_builder& attr(std::string_view spec, attr_value default_value) {
    auto a = detail::parse_attr(def_.name, spec);
    a.default_value = std::move(default_value);
    def_.attrs.push_back(std::move(a));
    return *this;
  }
  /// The op has state or effects (never merged by CSE, never constant-folded).
  op_def_builder& stateful(bool v = true) {
    def_.stateful = v;
    return *this;
  }
  /// The executor always runs the op inline (it is cheap whatever the sizes).
  op_def_builder& cheap(bool v = true) {
    def_.cheap = v;
    return *this;
  }
  /// The op's part in control flow (the executor runs it; no kernel).
  op_def_builder& control_flow(flow role) {
    def_.control = role;
    return *this;
  }
  /// The op's value is fed to run() (Placeholder).
  op_def_builder& feed() {
    def_.feed = true;
    return *this;
  }
  /// The op's output is its `value` attr (Const).
  op_def_builder& constant() {
    def_.constant = true;
    return *this;
  }
  /// The op is a variable (checkpoints save and restore it).
  op_def_builder& variable() {
    def_.variable = true;
    return *this;
  }
  /// The op runs when a value it reads is dead (AccumulatorPush).
  op_def_builder& runs_on_dead_value() {
    def_.runs_on_dead_value = true;
    return *this;
  }
  /// The shape function (op_def::shape_fn).
  op_def_builder& shape_fn(std::function<void(shape_context&)> f) {
    def_.shape_fn = std::move(f);
    return *this;
  }
  /// The cost rule (op_def::flops_fn).
  op_def_builder& flops(std::function<double(const op_cost_args&)> f) {
    def_.flops_fn = std::move(f);
    return *this;
  }
  /// The op_def (register_op(builder) builds and registers it).
  op_def build() const {
    op_def d = def_;
    for (auto* args : {&d.inputs, &d.outputs})
      for (auto& a : *args)
        if (const attr_def* ad = d.find_attr(a.type_attr); ad && ad->kind == attr_kind::type_list) a.type_list = true;
    return d;
  }

 private:
  op_def def_;
};

}  // namespace weft

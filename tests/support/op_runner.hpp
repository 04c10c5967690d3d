// Runs one op of the registry on inputs and attributes made from a stream of choices: the
// every-op test (tests/test_hardening.cpp) draws them from seeded generators, the kernel
// fuzz target (tests/fuzz/fuzz_kernel.cpp) from the fuzzer's bytes. Either way the op
// must build and run, or fail with a weft::error, and must leave every input as it was.
#pragma once

#include <weft/weft.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace weft::test {

// Where the choices come from: pick(n) is in [0, n).
class choices {
 public:
  virtual ~choices() = default;
  virtual std::uint64_t pick(std::uint64_t n) = 0;
  template <class T>
  const T& one_of(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(pick(v.size()))];
  }
};

// A seeded generator (splitmix64).
class seeded_choices final : public choices {
 public:
  explicit seeded_choices(std::uint64_t seed) : state_(seed) {}
  std::uint64_t pick(std::uint64_t n) override {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return n ? (z ^ (z >> 31)) % n : 0;
  }

 private:
  std::uint64_t state_;
};

// Choices read from bytes (a fuzzer's input); zeros once they run out.
class byte_choices final : public choices {
 public:
  byte_choices(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint64_t pick(std::uint64_t n) override {
    if (n <= 1) return 0;
    std::uint64_t v = 0;
    for (std::uint64_t range = n - 1; range; range >>= 8) v = (v << 8) | (pos_ < size_ ? data_[pos_++] : 0);
    return v % n;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// The ops the runner can build: the standard ops but for control flow (run by the
// executor around frames), Placeholder (fed), and Save and Restore (they write files).
inline std::vector<std::string> runnable_ops() {
  std::vector<std::string> names{"Const", "Identity", "NoOp"};
  for (const auto& op : ops::standard_ops())
    if (op.family != "control" && op.family != "io" && op.family != "data_flow") names.emplace_back(op.name);
  return names;
}

namespace detail {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

// Dims and values that reach the edges: empty, rank 0, and sizes that overflow.
inline std::vector<std::int64_t> some_dims(choices& c) {
  static const std::vector<std::vector<std::int64_t>> common{
      {}, {0}, {1}, {2}, {3}, {2, 3}, {3, 2}, {2, 2}, {1, 2, 2, 1}, {2, 3, 3, 2}, {2, 0, 3}, {4, 1}, {2, 2, 2, 2}, {2, 4, 4, 2}};
  if (c.pick(8) != 0) return c.one_of(common);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(c.pick(5)));
  for (auto& d : dims) d = static_cast<std::int64_t>(c.pick(5));
  return dims;
}
inline std::int64_t some_int(choices& c) {
  static const std::vector<std::int64_t> edges{
      0, 1, 2, 3, -1, -2, 4, 5, std::int64_t{1} << 31, std::int64_t{1} << 32, std::int64_t{1} << 62, int64_max,
      std::numeric_limits<std::int64_t>::min()};
  return c.pick(4) ? static_cast<std::int64_t>(c.pick(5)) - 1 : c.one_of(edges);
}

// A tensor of `type` and dims whose element i is value(i), converted (bool: odd or even).
template <class F>
tensor tensor_of_values(dtype type, std::vector<std::int64_t> dims, F&& value) {
  tensor t = tensor::zeros(type, shape(std::move(dims)));
  const std::int64_t n = t.num_elements();
  if (type == dtype::string) {  // the value's decimal digits; empty for a multiple of 3 (an empty
                                // message is the one a summary op can parse)
    std::string* p = t.data<std::string>();
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = value(i);
      p[i] = v % 3 == 0 ? std::string() : std::to_string(v);
    }
    return t;
  }
  dispatcher<all_types>::run(
      type,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = t.data<T>();
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t v = value(i);
          if constexpr (std::is_same_v<T, bool>) p[i] = (v & 1) != 0;
          else if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>)
            p[i] = T(static_cast<typename T::value_type>(v), 0);
          else p[i] = static_cast<T>(v);
        }
      },
      [] {});
  return t;
}
// A tensor of `type` and dims, with values from the choices: mostly small integers (int
// inputs are mostly axes, sizes and indices), or edges.
inline tensor some_tensor(choices& c, dtype type, std::vector<std::int64_t> dims) {
  const bool small = c.pick(3) != 0;
  return tensor_of_values(type, std::move(dims),
                          [&](std::int64_t) { return small ? static_cast<std::int64_t>(c.pick(4)) : some_int(c); });
}

// An attribute: half the time a usual value (1, [1, 1, 1, 1], 'SAME', the data's dims),
// else one from the edges.
inline attr_value some_attr(choices& c, const attr_def& a, dtype t, const std::vector<std::int64_t>& dims = {2, 3}) {
  if (c.pick(2) == 0) {
    switch (a.kind) {
      case attr_kind::integer: return attr_value(std::int64_t{1});
      case attr_kind::string: return attr_value(std::string(c.pick(2) ? "SAME" : "VALID"));
      case attr_kind::int_list: return attr_value(std::vector<std::int64_t>{1, 1, 1, 1});
      case attr_kind::shape: return attr_value(partial_shape(dims));
      default: break;
    }
  }
  switch (a.kind) {
    case attr_kind::integer: return attr_value(some_int(c));
    case attr_kind::real: return attr_value(c.one_of(std::vector<double>{0.5, 0.0, 1.0, -1.0, 1e300}));
    case attr_kind::boolean: return attr_value(c.pick(2) == 1);
    case attr_kind::string:
      return attr_value(c.one_of(std::vector<std::string>{"SAME", "VALID", "NHWC", "", "x"}));
    case attr_kind::type: {
      if (!a.allowed.empty()) return attr_value(c.pick(4) ? (std::find(a.allowed.begin(), a.allowed.end(), t) != a.allowed.end()
                                                                  ? t : a.allowed.front())
                                                          : c.one_of(a.allowed));
      return attr_value(c.pick(4) ? t : static_cast<dtype>(1 + c.pick(dtype_count - 1)));
    }
    case attr_kind::shape: return attr_value(partial_shape(some_dims(c)));
    case attr_kind::tensor: return attr_value(some_tensor(c, t, some_dims(c)));
    case attr_kind::int_list: {
      static const std::vector<std::vector<std::int64_t>> lists{
          {1, 1, 1, 1}, {1, 2, 2, 1}, {1, 3, 3, 1}, {}, {0}, {1}, {0, 1}, {1, std::int64_t{1} << 32, std::int64_t{1} << 32, 1},
          {1, std::int64_t{1} << 62, 1, 1}, {1, 0, 1, 1}, {1, -1, 1, 1}};
      return attr_value(c.one_of(lists));
    }
    case attr_kind::real_list: return attr_value(std::vector<double>{0.5});
    case attr_kind::type_list: return attr_value(std::vector<dtype>(static_cast<std::size_t>(c.pick(3)), t));
    case attr_kind::shape_list: return attr_value(std::vector<partial_shape>{partial_shape(some_dims(c))});
    case attr_kind::string_list: return attr_value(std::vector<std::string>{"a"});
  }
  return attr_value(std::int64_t{0});
}

}  // namespace detail

struct op_result {
  bool built = false;  // the node was added to a graph
  bool ran = false;    // and its step succeeded
  std::string error;   // the weft::error's message, when one was thrown
  std::vector<std::string> changed_inputs;  // inputs whose values differ after the run
  std::vector<tensor> outputs;              // its outputs, when it ran
  std::vector<tensor> inputs;               // the values of its inputs (refs: their initial values)
  attr_map attrs;                           // the attributes it was built with
};

// Where the op runs: a device the node asks for ("/device:GPU:0"; empty: the placer's
// choice, CPU:0) and the session's devices of other types (session_options::device_count).
struct op_placement {
  std::string device;
  std::map<std::string, int> device_count;
};

// Builds `op` for dtype `t` (its attr `type_attr`, T by default, where it has one and
// admits t) from the choices, runs it on one
// intra-op thread (or two), and checks that its inputs are unchanged. Inputs come in as
// Consts (the graph holds their values) or as fed placeholders (the caller holds them).
// Allocations are limited to 64 MiB per step, so a valid but large request is a clean error.
inline op_result run_op(std::string_view op, dtype t, choices& c, const op_placement& where = {},
                        std::string_view type_attr = "T") {
  op_result result;
  const op_def* def = op_registry::global().find(op);
  if (!def) {
    result.error = "no op " + std::string(op);
    return result;
  }
  graph g;
  attr_map attrs;
  const std::vector<std::int64_t> main_dims = detail::some_dims(c);  // what most data inputs have
  for (const auto& a : def->attrs) {
    if (a.kind == attr_kind::type && a.name == type_attr && (a.allowed.empty() || std::find(a.allowed.begin(), a.allowed.end(), t) != a.allowed.end()))
      attrs.set(a.name, t);
    else if (!a.default_value || c.pick(4) == 0)
      attrs.set(a.name, detail::some_attr(c, a, t, main_dims));
  }
  // The dtype each input argument takes: a fixed one, a type attr's, or T.
  auto type_of = [&](const arg_def& a, std::size_t j) -> dtype {
    if (a.fixed != dtype::invalid) return a.fixed;
    const attr_value* v = attrs.find(a.type_attr);
    if (v && v->get_if<dtype>()) return *v->get_if<dtype>();
    if (v && v->get_if<std::vector<dtype>>() && j < v->get_if<std::vector<dtype>>()->size())
      return (*v->get_if<std::vector<dtype>>())[j];
    if (const attr_def* ad = def->find_attr(a.type_attr); ad && !ad->allowed.empty())
      return std::find(ad->allowed.begin(), ad->allowed.end(), t) != ad->allowed.end() ? t : ad->allowed.front();
    return t;
  };
  std::vector<output> inputs;
  std::vector<tensor> values, before;
  std::vector<endpoint> fetches, inits;  // inits: the Assigns that give ref inputs their values
  feed_list feeds;
  const auto rank = static_cast<std::int64_t>(main_dims.size());
  for (const auto& a : def->inputs) {
    std::size_t count = 1;
    if (a.type_list) {
      const attr_value* v = attrs.find(a.type_attr);
      count = v && v->get_if<std::vector<dtype>>() ? v->get_if<std::vector<dtype>>()->size() : 1;
    } else if (!a.number_attr.empty()) {
      count = 1 + c.pick(3);
      attrs.set(a.number_attr, static_cast<std::int64_t>(count));
    }
    for (std::size_t j = 0; j < count; ++j) {
      const dtype type = type_of(a, j);
      if (type == dtype::invalid) continue;
      // Data inputs mostly share one shape. Integer side inputs (axes, sizes, indices) are
      // mostly a scalar or a vector of one entry per dim; an input named for a shape mostly
      // holds the data's dims; hyperparameters and fill values are mostly scalars.
      const bool side = !is_floating(type) && !is_complex(type) && a.type_attr != "T";
      const std::string_view arg = a.name;
      const bool scalar_arg = arg == "alpha" || arg == "lr" || arg == "momentum" || arg == "rho" || arg == "epsilon" ||
                              arg.starts_with("beta") || arg == "rate" || arg == "value" || arg.ends_with("_value");
      const bool dims_arg = arg.ends_with("sizes") || arg.ends_with("shape") || arg == "dims";
      tensor value;
      if (side && dims_arg && c.pick(2) == 0) {
        value = detail::tensor_of_values(type, {rank}, [&](std::int64_t d) { return main_dims[static_cast<std::size_t>(d)]; });
      } else if (side) {
        const std::uint64_t form = c.pick(3);
        value = detail::some_tensor(c, type, form == 0 ? std::vector<std::int64_t>{} : form == 1 ? std::vector<std::int64_t>{rank}
                                                                                                : detail::some_dims(c));
      } else if (scalar_arg && c.pick(4) != 0) {
        value = detail::some_tensor(c, type, {});
      } else {
        value = detail::some_tensor(c, type, c.pick(4) == 0 ? detail::some_dims(c) : main_dims);
      }
      result.inputs.push_back(value);
      if (a.is_ref) {
        auto& var = g.variable(type, partial_shape(value.shape()));
        inits.emplace_back(g.op("Assign", {var, g.constant(value)}));
        inputs.push_back(var);
        continue;  // a variable is there to change
      }
      values.push_back(value);
      before.push_back(value.copy());
      if (c.pick(2)) {
        inputs.push_back(g.constant(value));
      } else {
        auto& p = g.placeholder(type, partial_shape(value.shape()));
        inputs.push_back(p);
        feeds.emplace_back(endpoint(output(p)), value);
      }
    }
  }
  try {
    const node& n = g.op(op, inputs, attrs, where.device.empty() ? node_options("op") : node_options("op").on(where.device));
    result.built = true;
    result.attrs = n.attrs();
    for (int i = 0; i < n.num_outputs(); ++i) fetches.emplace_back(n.out(i));
    session_options o;
    o.inter_op_threads = 0;
    o.intra_op_threads = 1 + static_cast<int>(c.pick(2));
    o.memory_limit_bytes = std::size_t{64} << 20;
    o.device_count = where.device_count;
    session s(g, o);
    if (!inits.empty()) s.run(inits);
    result.outputs = s.run(feeds, fetches, fetches.empty() ? std::vector<endpoint>{endpoint(n)} : std::vector<endpoint>{});
    result.ran = true;
  } catch (const error& e) {
    result.error = e.what();
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    bool same = values[i].bytes() == before[i].bytes();
    if (same && values[i].dtype() == dtype::string)  // the elements, not the std::string objects
      same = values[i].to_vector<std::string>() == before[i].to_vector<std::string>();
    else if (same && values[i].bytes())
      same = std::memcmp(values[i].raw_data(), before[i].raw_data(), values[i].bytes()) == 0;
    if (!same) result.changed_inputs.push_back(std::to_string(i));
  }
  return result;
}

}  // namespace weft::test

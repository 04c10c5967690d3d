/// @file
/// attr_map: a node's attributes, sorted by name. shape_context: what an op's shape rule
/// sees while its node is added to a graph (input dtypes, partial shapes, values of
/// constant inputs, attributes) and where it writes the output shapes.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>
#include <weft/core/tensor.hpp>
#include <weft/framework/attr.hpp>

namespace weft {

/// A node's attrs by name, kept sorted by name: `{{"T", dtype::float32}, {"axis", 1}}`.
class attr_map {
 public:
  /// A name and its value.
  using entry = std::pair<std::string, attr_value>;

  attr_map() = default;
  /// The given entries; a later one replaces an earlier one of the same name.
  attr_map(std::initializer_list<entry> entries) {
    for (const auto& e : entries) set(e.first, e.second);
  }

  /// Sets attr `key` to v, replacing any value it had.
  void set(std::string_view key, attr_value v) {
    auto it = lower(key);
    if (it != entries_.end() && it->first == key)
      it->second = std::move(v);
    else
      entries_.insert(it, entry(std::string(key), std::move(v)));
  }
  /// The value of attr `key`, or null.
  const attr_value* find(std::string_view key) const {
    auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                               [](const entry& e, std::string_view k) { return e.first < k; });
    return it != entries_.end() && it->first == key ? &it->second : nullptr;
  }
  /// Whether attr `key` is set.
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  /// Every entry, sorted by name.
  const std::vector<entry>& entries() const noexcept { return entries_; }
  /// Equal when the same names have equal values.
  friend bool operator==(const attr_map&, const attr_map&) = default;

 private:
  std::vector<entry>::iterator lower(std::string_view key) {
    return std::lower_bound(entries_.begin(), entries_.end(), key,
                            [](const entry& e, std::string_view k) { return e.first < k; });
  }
  std::vector<entry> entries_;
};

/// Reads a typed attribute; `who` prefixes the error when it is missing or of another kind.
template <class T>
const T& get_attr(const attr_map& attrs, std::string_view key, const std::string& who) {
  const attr_value* v = attrs.find(key);
  if (!v) fail(error_code::invalid_argument, who, ": missing attr '", key, "'");
  const T* p = v->get_if<T>();
  if (!p) fail(error_code::invalid_argument, who, ": attr '", key, "' has kind ", name(v->kind()));
  return *p;
}

/// What an op's shape function sees of a node being added: the inputs' dtypes, inferred
/// shapes and (for constant inputs) values, the attrs; it sets each output's shape with
/// set_output and rejects the node with fail(), whose error names the node, op, and every
/// input's dtype and shape.
class shape_context {
 public:
  /// A context for the node `who` describes (node::describe()), made by the graph.
  shape_context(const std::string& who, const attr_map& attrs, std::vector<dtype> in_types,
                std::vector<partial_shape> in_shapes, std::vector<const tensor*> in_values,
                std::vector<dtype> out_types)
      : who_(who), attrs_(attrs), in_types_(std::move(in_types)), in_shapes_(std::move(in_shapes)),
        in_values_(std::move(in_values)), out_types_(std::move(out_types)),
        out_shapes_(out_types_.size()) {}

  /// How many data inputs the node has.
  int num_inputs() const noexcept { return static_cast<int>(in_shapes_.size()); }
  /// How many outputs it has.
  int num_outputs() const noexcept { return static_cast<int>(out_types_.size()); }
  /// Input i's dtype.
  dtype input_dtype(int i) const { return in_types_.at(static_cast<std::size_t>(i)); }
  /// Input i's shape as inferred (dims or the rank may be unknown).
  const partial_shape& input(int i) const { return in_shapes_.at(static_cast<std::size_t>(i)); }
  /// Output i's dtype.
  dtype output_dtype(int i) const { return out_types_.at(static_cast<std::size_t>(i)); }
  /// The value of input i when its producer is a constant, else nullptr.
  const tensor* input_value(int i) const { return in_values_.at(static_cast<std::size_t>(i)); }

  /// Attr `key` as T; missing or of another kind is an error naming the node.
  template <class T>
  const T& attr(std::string_view key) const {
    return get_attr<T>(attrs_, key, who_);
  }
  /// Every attr of the node.
  const attr_map& attrs() const noexcept { return attrs_; }

  /// The known dims of an output shape obey a shape's rule (core/checked.hpp): their
  /// non-zero product fits in int64, so a rule that multiplied through a zero dim, or never
  /// multiplied, cannot hand on a shape that later products overflow.
  void set_output(int i, partial_shape s) {
    if (s.rank_known()) {
      std::vector<std::int64_t> known;
      for (auto d : s.dims())
        if (d >= 0) known.push_back(d);
      (void)checked_element_count(known, "an output shape");
    }
    out_shapes_.at(static_cast<std::size_t>(i)) = std::move(s);
  }
  /// The outputs' shapes as set so far (unknown rank where unset).
  const std::vector<partial_shape>& output_shapes() const noexcept { return out_shapes_; }

  /// Throws invalid_argument naming the node, op, and every input's dtype and shape.
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    fail_with(error_code::invalid_argument, detail::concat(parts...));
  }
  /// Rethrows `e`, thrown inside the shape rule by a helper that does not know the node
  /// (checked arithmetic, a shape's constructor), with the node, op and inputs added.
  [[noreturn]] void rethrow(const error& e) const {
    if (std::string_view(e.what()).starts_with(who_)) throw e;
    fail_with(e.code(), e.what());
  }

  /// Helpers for common rules.
  void set_output_same_as_input(int out = 0, int in = 0) { set_output(out, input(in)); }
  /// Resolves a possibly negative axis against a known rank, failing when out of range.
  int canonical_axis(std::int64_t axis, int rank) const {
    if (axis < -rank || axis >= std::max(rank, 1))
      fail("axis ", axis, " is out of range for rank ", rank);
    return static_cast<int>(axis < 0 ? axis + rank : axis);
  }

 private:
  [[noreturn]] void fail_with(error_code code, const std::string& what) const {
    std::ostringstream out;
    out << who_ << ": " << what << " (inputs:";
    for (int i = 0; i < num_inputs(); ++i) out << (i ? ", " : " ") << input_dtype(i) << input(i);
    out << ')';
    throw error(code, out.str());
  }
  const std::string& who_;
  const attr_map& attrs_;
  std::vector<dtype> in_types_;
  std::vector<partial_shape> in_shapes_;
  std::vector<const tensor*> in_values_;
  std::vector<dtype> out_types_;
  std::vector<partial_shape> out_shapes_;
};

}  // namespace weft

// Common subexpression elimination (the whitepaper's §5, "Optimizations"), as a graph is
// built: before adding a node, a builder asks whether an equal node is already there. Two
// nodes are equal when they run the same op on the same inputs with the same attributes,
// request the same device and colocation, and wait on the same control inputs. Stateful
// ops (variables, random numbers, queues) never merge: two of them are two states. The
// typed DSL's lowering (dsl/expr.hpp) adds every node through such a table.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/graph/graph.hpp>

namespace weft::passes {

// What makes a node the same as another, besides its op and inputs.
struct cse_signature {
  attr_map attrs;
  std::string device, colocate;
  std::vector<int> controls;
  bool operator==(const cse_signature&) const = default;
};

class cse_table {
 public:
  // The node equal to op(inputs) with `signature` added before, if any.
  std::optional<int> find(std::string_view op, const std::vector<output>& inputs, const cse_signature& signature) const {
    auto it = nodes_.find(key{std::string(op), inputs});
    if (it == nodes_.end()) return std::nullopt;
    for (const auto& [sig, id] : it->second)
      if (sig == signature) return id;
    return std::nullopt;
  }
  // Records node `id` as op(inputs) with `signature`.
  void insert(std::string_view op, std::vector<output> inputs, cse_signature signature, int id) {
    nodes_[key{std::string(op), std::move(inputs)}].emplace_back(std::move(signature), id);
  }

 private:
  using key = std::pair<std::string, std::vector<output>>;
  std::map<key, std::vector<std::pair<cse_signature, int>>> nodes_;
};

}  // namespace weft::passes

/// @file
/// Common subexpression elimination (the whitepaper's §5, "Optimizations"). Two nodes are
/// equal when they run the same op on the same inputs with the same attributes, request the
/// same device and colocation, and wait on the same control inputs. Stateful ops (variables,
/// random numbers, queues) never merge: two of them are two states.
///
/// Two uses: as a graph is built, a builder asks a cse_table whether an equal node is already
/// there before adding one (the typed DSL's lowering, dsl/expr.hpp, adds every node so); and
/// over a finished graph, for one run, common_subexpressions() finds which nodes stand for
/// which (the session runs one node of each class: runtime/session.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/graph/graph.hpp>

namespace weft::passes {

/// What makes a node the same as another, besides its op and inputs.
struct cse_signature {
  attr_map attrs;            ///< the node's attrs
  std::string device;        ///< its requested device
  std::string colocate;      ///< the node it is colocated with
  std::vector<int> controls; ///< its control inputs
  /// Equal in every part.
  bool operator==(const cse_signature&) const = default;
};

/// The nodes a common-subexpression pass has seen, by op, inputs and signature, to find a
/// node equal to one about to be added.
class cse_table {
 public:
  /// The node equal to op(inputs) with `signature` added before, if any.
  std::optional<int> find(std::string_view op, const std::vector<output>& inputs, const cse_signature& signature) const {
    auto it = nodes_.find(key{std::string(op), inputs});
    if (it == nodes_.end()) return std::nullopt;
    for (const auto& [sig, id] : it->second)
      if (sig == signature) return id;
    return std::nullopt;
  }
  /// Records node `id` as op(inputs) with `signature`.
  void insert(std::string_view op, std::vector<output> inputs, cse_signature signature, int id) {
    nodes_[key{std::string(op), std::move(inputs)}].emplace_back(std::move(signature), id);
  }

 private:
  using key = std::pair<std::string, std::vector<output>>;
  std::map<key, std::vector<std::pair<cse_signature, int>>> nodes_;
};

/// Whether CSE may merge node n with an equal node: not a stateful op, a control-flow op (the
/// executor runs each itself; frames keep their own Enters, Merges and Exits), a fed op
/// (Placeholder), or a node reading a variable through a reference (two reads may see two
/// values).
inline bool mergeable(const node& n) {
  const op_def& d = n.def();
  if (d.stateful || d.control != flow::plain || d.feed) return false;
  for (int i = 0; i < n.num_inputs(); ++i)
    if (n.input_is_ref(i)) return false;
  return true;
}

/// CSE over a finished graph, for one run: for each node of g, the node that stands for it,
/// the first (lowest id) node equal to it among those `needed` (itself when it has none, or
/// is not needed). Inputs and control inputs compare through the mapping, so chains of equal
/// nodes merge whole. A node with an output the run feeds (`is_fed(output)`) keeps itself: its
/// consumers read the fed value, an equal node's consumers the computed one.
template <class IsFed>
std::vector<int> common_subexpressions(const graph& g, const std::vector<bool>& needed, IsFed&& is_fed) {
  std::vector<int> rep(static_cast<std::size_t>(g.size()));
  std::iota(rep.begin(), rep.end(), 0);
  cse_table table;
  std::vector<output> inputs;
  for (int id = 0; id < g.size(); ++id) {
    if (!needed[static_cast<std::size_t>(id)]) continue;
    const node& n = g.at(id);
    if (!mergeable(n)) continue;
    bool fed = false;
    for (int p = 0; p < n.num_outputs() && !fed; ++p) fed = is_fed(output{id, p});
    if (fed) continue;
    // Inputs come before their consumers (the back edges of loops end at Merges, which do not
    // merge), so each input's stand-in is known.
    inputs.clear();
    for (output in : n.inputs()) inputs.push_back(output{rep[static_cast<std::size_t>(in.node)], in.port});
    cse_signature signature{n.attrs(), n.device(), n.colocation(), {}};
    for (int c : n.control_inputs()) signature.controls.push_back(rep[static_cast<std::size_t>(c)]);
    std::sort(signature.controls.begin(), signature.controls.end());
    signature.controls.erase(std::unique(signature.controls.begin(), signature.controls.end()),
                             signature.controls.end());
    if (auto same = table.find(n.op(), inputs, signature)) rep[static_cast<std::size_t>(id)] = *same;
    else table.insert(n.op(), inputs, std::move(signature), id);
  }
  return rep;
}

}  // namespace weft::passes

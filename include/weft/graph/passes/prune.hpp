/// @file
/// Pruning (the whitepaper's §3.2 and §4.2): the nodes one run of a graph needs. A run
/// names the outputs it fetches, the nodes it only runs (targets) and the outputs it is fed;
/// it needs every node reached walking back from its fetches and targets through data and
/// control inputs, and stops at fed outputs: what produces a fed value does not run.
#pragma once

#include <cstddef>
#include <vector>

#include <weft/graph/graph.hpp>

namespace weft::passes {

/// needed[id] for each node of g. `is_fed(output)` tells whether an output is fed. With `rep`
/// (CSE's common_subexpressions: the node that stands for each node), the walk goes through
/// it and marks stand-ins only.
template <class IsFed>
std::vector<bool> prune(const graph& g, const std::vector<output>& fetched, const std::vector<int>& targets, IsFed&& is_fed,
                        const std::vector<int>& rep = {}) {
  std::vector<bool> needed(static_cast<std::size_t>(g.size()), false);
  std::vector<int> stack;
  auto need = [&](int id) {
    if (!rep.empty()) id = rep[static_cast<std::size_t>(id)];
    if (!needed[static_cast<std::size_t>(id)]) {
      needed[static_cast<std::size_t>(id)] = true;
      stack.push_back(id);
    }
  };
  for (output o : fetched)
    if (!is_fed(o)) need(o.node);
  for (int t : targets) need(t);
  while (!stack.empty()) {
    const node& n = g.at(stack.back());
    stack.pop_back();
    for (output in : n.inputs())
      if (!is_fed(in)) need(in.node);
    for (int c : n.control_inputs()) need(c);
  }
  return needed;
}

}  // namespace weft::passes

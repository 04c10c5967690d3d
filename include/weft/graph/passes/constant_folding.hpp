/// @file
/// Constant folding (the whitepaper's §5, "Optimizations"): the nodes of a signature whose
/// value is the same at every step, because everything they read is a Const, are evaluated
/// once, when the executable is built, and their outputs become constants of it. This pass
/// finds them; the runtime evaluates them with its kernels (runtime/session.hpp).
///
/// A node folds when it is needed by the signature, is not itself a Const, is stateless
/// (the op definition's `stateful`: variables, random numbers, accumulators, file I/O are
/// never folded), is not control flow, has no control inputs, reads only outputs that are
/// not fed and that come from Const nodes or from nodes that fold, and every one of its
/// outputs has a fully known shape of at most `max_bytes`. Only the boundary of the folded
/// region is evaluated and kept: the outputs of folding nodes that a non-folding node reads
/// or a fetch names.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <weft/core/dtype.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/graph.hpp>

namespace weft::passes {

/// How far constant folding goes.
struct constant_folding_options {
  /// The most bytes one output of a folded node may hold; 0 turns folding off. 10 MiB, as
  /// TensorFlow's graph optimizer: a folded value stays in memory for as long as the
  /// executable that holds it.
  std::size_t max_bytes = std::size_t{10} << 20;
};

/// What constant folding evaluates: the outputs at the boundary of the foldable region.
struct folding_plan {
  std::vector<output> outputs;  ///< what to evaluate and keep: the region's boundary, by node and port
};

/// Whether every output of `n` has a fully known shape of at most max_bytes.
inline bool outputs_fit(const node& n, std::size_t max_bytes) {
  for (int i = 0; i < n.num_outputs(); ++i) {
    const partial_shape& s = n.output_shape(i);
    if (!s.fully_known()) return false;
    double bytes = static_cast<double>(size_of(n.output_dtype(i)));  // in double: no product overflows
    for (int d = 0; d < s.rank(); ++d) bytes *= static_cast<double>(s[d]);
    if (bytes > static_cast<double>(max_bytes)) return false;
  }
  return true;
}

/// The folding plan of a signature of `g`: `needed` marks the nodes it runs (by id), `fed`
/// the outputs it is fed, `fetched` those it returns.
folding_plan plan_constant_folding(const graph& g, const std::vector<bool>& needed,
                                   const std::vector<output>& fed, const std::vector<output>& fetched,
                                   const constant_folding_options& options = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE folding_plan plan_constant_folding(const graph& g, const std::vector<bool>& needed,
                                                              const std::vector<output>& fed, const std::vector<output>& fetched,
                                                              const constant_folding_options& options) {
  folding_plan plan;
  if (options.max_bytes == 0) return plan;
  const auto count = static_cast<std::size_t>(g.size());
  // constant[id]: the node's outputs are the same at every step (a Const, or a node that folds).
  std::vector<char> constant(count, 0), folds(count, 0);
  bool any = false;
  auto is_fed = [&](output o) { return std::find(fed.begin(), fed.end(), o) != fed.end(); };
  for (int id = 0; id < g.size(); ++id) {
    const auto i = static_cast<std::size_t>(id);
    if (!needed[i]) continue;
    const node& n = g.at(id);
    if (n.def().constant) {  // one with a control input runs in a loop's frame: its readers stay there
      constant[i] = n.control_inputs().empty();
      continue;
    }
    if (n.def().stateful || n.def().control != flow::plain || n.def().feed) continue;
    if (!n.control_inputs().empty() || n.num_inputs() == 0 || n.num_outputs() == 0) continue;
    bool from_constants = true;
    for (int k = 0; k < n.num_inputs() && from_constants; ++k) {
      const output in = n.inputs()[static_cast<std::size_t>(k)];
      from_constants = constant[static_cast<std::size_t>(in.node)] && !n.input_is_ref(k) && !is_fed(in);
    }
    if (!from_constants || !outputs_fit(n, options.max_bytes)) continue;
    constant[i] = folds[i] = 1;
    any = true;
  }
  if (!any) return plan;
  // The boundary: outputs of folding nodes read by a needed node that does not fold, or fetched.
  auto keep = [&](output o) {
    if (folds[static_cast<std::size_t>(o.node)] && !is_fed(o)) plan.outputs.push_back(o);
  };
  for (int id = 0; id < g.size(); ++id) {
    const auto i = static_cast<std::size_t>(id);
    if (!needed[i] || folds[i]) continue;
    for (const output& in : g.at(id).inputs()) keep(in);
  }
  for (const output& o : fetched) keep(o);
  std::sort(plan.outputs.begin(), plan.outputs.end(),
            [](output a, output b) { return a.node != b.node ? a.node < b.node : a.port < b.port; });
  plan.outputs.erase(std::unique(plan.outputs.begin(), plan.outputs.end()), plan.outputs.end());
  return plan;
}
#endif

}  // namespace weft::passes

/// @file
/// Symbolic reverse-mode differentiation of a graph (the whitepaper's §4.1): the graph is
/// extended backwards from the outputs `ys` with each op's gradient rule; partials reaching
/// one tensor from several consumers are summed, and an x that no y depends on gets zeros.
///
/// Rules are written once, generically, over a value type V with the arithmetic of
/// expressions (+, -, *, /, exp, matmul, select, sum_to, ...): `symbol` below for graphs
/// built op by op at run time. Each rule gets the node, its inputs and outputs, and the
/// gradients flowing into its outputs, and returns one gradient per input (none for
/// inputs that are not differentiable, such as a reduction's axes). Forward values are the
/// node's own inputs and outputs: the backward graph reads them, it never recomputes them,
/// so it grows linearly with the forward graph.
///
///   graph g; ...
///   auto dx = weft::add_gradients(g, {loss}, {w1, b1});   // one output per x
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/graph/control_flow.hpp>
#include <weft/graph/gradient_rules.hpp>
#include <weft/graph/gradient_symbol.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/frames.hpp>
#include <weft/ops/standard.hpp>

namespace weft {

namespace detail {
inline bool differentiable(dtype t) {
  return t == dtype::float32 || t == dtype::float64 || t == dtype::float16 || t == dtype::bfloat16;
}
}  // namespace detail

namespace detail {

/// A while loop of the graph (graph/control_flow.hpp's lowering): per loop variable its
/// Enter, Merge, Switch, Exit and NextIteration, the invariants' Enters, the LoopCond.
struct loop_structure {
  struct variable {
    int enter = -1, merge = -1, sw = -1, exit = -1;
    output next{};  ///< what the body gives back (the NextIteration's input)
  };
  std::string frame_name;
  std::int64_t parallel_iterations = 10;
  std::vector<variable> vars;
  std::vector<int> invariants;
  int loop_cond = -1;
  std::vector<char> structure;  ///< per node id: one of the nodes above
};

/// Finds the loop of frame f; throws when its structure is not Enter -> Merge ->
/// Switch(LoopCond) -> NextIteration -> the same Merge.
loop_structure find_loop(const graph& g, const passes::frame_map& frames, int f,
                         const std::vector<std::vector<std::pair<int, int>>>& consumers);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE loop_structure find_loop(const graph& g, const passes::frame_map& frames, int f,
                                                    const std::vector<std::vector<std::pair<int, int>>>& consumers) {
  loop_structure L;
  L.frame_name = frames.info(f).name;
  L.structure.assign(static_cast<std::size_t>(g.size()), 0);
  auto bad = [&](const node& n, const std::string& what) {
    fail(error_code::unimplemented, "weft::add_gradients: the loop '", L.frame_name, "' at ", n.describe(),
         " is not a while loop it can differentiate: ", what);
  };
  auto mark = [&](int id) { L.structure[static_cast<std::size_t>(id)] = 1; };
  auto consumer = [&](output o, std::string_view op) {
    for (auto [c, i] : consumers[static_cast<std::size_t>(o.node)])
      if (g.at(c).inputs()[static_cast<std::size_t>(i)] == o && g.at(c).op() == op) return c;
    return -1;
  };
  for (int id = 0; id < static_cast<int>(consumers.size()); ++id) {
    if (frames.child(id) != f) continue;
    const node& e = g.at(id);
    L.parallel_iterations = e.attr<std::int64_t>("parallel_iterations");
    mark(id);
    if (e.attr<bool>("is_constant")) {
      L.invariants.push_back(id);
      continue;
    }
    loop_structure::variable v;
    v.enter = id;
    v.merge = consumer(e.out(0), "Merge");
    if (v.merge < 0) bad(e, "the Enter feeds no Merge");
    const node& m = g.at(v.merge);
    if (m.num_inputs() != 2 || m.inputs()[0] != e.out(0) || g.at(m.inputs()[1]).op() != "NextIteration")
      bad(m, "a loop's Merge takes its Enter, then its NextIteration");
    v.next = g.at(m.inputs()[1]).inputs()[0];
    v.sw = consumer(m.out(0), "Switch");
    if (v.sw < 0) bad(m, "the Merge feeds no Switch");
    const node& sw = g.at(v.sw);
    const int cond = sw.inputs()[1].node;
    if (g.at(cond).op() != "LoopCond" || (L.loop_cond >= 0 && L.loop_cond != cond))
      bad(sw, "the Switch is not on the loop's LoopCond");
    L.loop_cond = cond;
    v.exit = consumer(sw.out(0), "Exit");
    for (int s : {v.merge, v.sw, m.inputs()[1].node, cond}) mark(s);
    if (v.exit >= 0) mark(v.exit);
    L.vars.push_back(v);
  }
  if (L.vars.empty() || L.loop_cond < 0) fail(error_code::unimplemented, "weft::add_gradients: the loop '", L.frame_name, "' has no loop variable");
  return L;
}
#endif

struct gradient_pass;

/// Where the gradient nodes of one frame go: the root, or the body of the backward loop of
/// a forward loop. Forward values the rules read are brought in: a value of the forward
/// loop is pushed on an accumulator in each forward iteration and popped in the matching
/// backward iteration (AccumulatorPush/AccumulatorPop, keyed by the iteration path); an
/// outer value enters as a loop invariant; a node with no input (a constant) is made
/// outside and enters as one too.
class frame_context final : public gradient_builder {
 public:
  frame_context(gradient_pass& pass, gradient_builder& base) : pass_(pass), base_(base) {}
  frame_context(gradient_pass& pass, gradient_builder& base, frame_context& parent, int forward_frame, loop_scope& scope,
                output key, output forward_path)
      : pass_(pass), base_(base), parent_(&parent), frame_(forward_frame), scope_(&scope), key_(key), forward_path_(forward_path) {}

  const graph& target() const override { return base_.target(); }
  graph* mutable_graph() override { return base_.mutable_graph(); }
  output add(std::string_view op, std::vector<output> inputs, attr_map attrs) override {
    if (!parent_) return base_.add(op, std::move(inputs), std::move(attrs));
    if (inputs.empty()) return scope_->invariant(parent_->add(op, {}, std::move(attrs)));
    for (auto& in : inputs) in = bring(in);
    return base_.add_in_place(op, std::move(inputs), std::move(attrs));  // in the backward loop's body
  }
  output bring(output o);
  /// What the symbols of this frame are built with: the base builder itself at the root (a
  /// DSL lowering's rules look for theirs), else this context.
  gradient_builder& symbols() noexcept { return parent_ ? static_cast<gradient_builder&>(*this) : base_; }

  int forward_frame() const noexcept { return frame_; }
  bool is_root() const noexcept { return parent_ == nullptr; }  ///< the context the gradient is taken in
  output forward_path() const noexcept { return forward_path_; }  ///< the forward loop's iteration path, in its frame
  const std::vector<std::pair<output, std::string>>& pushes() const noexcept { return pushes_; }

 private:
  gradient_pass& pass_;
  gradient_builder& base_;
  frame_context* parent_ = nullptr;
  int frame_ = 0;
  loop_scope* scope_ = nullptr;
  output key_{}, forward_path_{};
  std::map<output, output> brought_;
  std::vector<std::pair<output, std::string>> pushes_;  ///< forward values to push, and their accumulators
};

struct gradient_pass {
  gradient_builder& base;
  const graph& g;
  int n;  ///< the forward graph's nodes: ids below n
  passes::frame_map frames;  ///< graph/passes/frames.hpp, unchecked
  std::vector<std::vector<std::pair<int, int>>> consumers;  ///< per forward node: (consumer, input index)
  std::map<int, loop_structure> loops;                      ///< by frame
  std::vector<char> from_x, to_y;
  std::map<output, std::vector<symbol>> pending;  ///< partials reaching each forward tensor
  std::vector<std::unique_ptr<frame_context>> contexts;
  std::map<int, int> added_forward;  ///< nodes the pass added to forward loops that the gradient reads: their frame

  std::string callers_device;  ///< the device scope add_gradients was called in
  /// The frame the gradient is taken in: 0 (the root), or the frame of a loop body whose
  /// iteration holds every x and y (a gradient per iteration, built inside the body).
  int root_frame = 0;
  /// In a loop body (root_frame), the body's iteration as a vector [k], made when a loop
  /// nested in the body needs it (forward_path()): the first entry of the paths its forward and
  /// backward loops key their accumulators by, so that iterations of the body in flight
  /// together keep their values apart.
  output root_iteration{};

  explicit gradient_pass(gradient_builder& b) : base(b), g(b.target()), n(g.size()), frames(passes::find_frames(g, false)) {
    if (const graph* target = b.mutable_graph()) callers_device = target->current_device_scope();
    consumers.resize(static_cast<std::size_t>(n));
    for (int id = 0; id < n; ++id)
      for (std::size_t i = 0; i < g.at(id).inputs().size(); ++i)
        consumers[static_cast<std::size_t>(g.at(id).inputs()[i].node)].push_back({id, static_cast<int>(i)});
  }
  const loop_structure& loop(int f) {
    auto it = loops.find(f);
    if (it == loops.end()) it = loops.emplace(f, find_loop(g, frames, f, consumers)).first;
    return it->second;
  }
  bool on_path(int id) const { return from_x[static_cast<std::size_t>(id)] && to_y[static_cast<std::size_t>(id)]; }

  std::optional<symbol> total(output o) {
    auto it = pending.find(o);
    if (it == pending.end()) return std::nullopt;
    symbol s = it->second.front();
    for (std::size_t k = 1; k < it->second.size(); ++k) s = s + it->second[k];
    it->second.assign(1, s);
    return s;
  }
  /// A constant in forward frame f (entered into each loop around it; in the frame the
  /// gradient is taken in, the builder's own: a loop body's follows its pivot).
  output forward_constant(int f, const tensor& t) {
    if (f == 0 || f == root_frame) return base.add("Const", {}, {{"value", t}, {"dtype", t.dtype()}});
    const loop_structure& L = loop(f);
    return base.add_in_place("Enter", {forward_constant(frames.info(f).parent, t)},
                             {{"frame_name", L.frame_name}, {"is_constant", true}, {"parallel_iterations", L.parallel_iterations}});
  }

  /// The nodes of forward frame f, in reverse topological order, a loop nested in f counting
  /// as one unit (its Enters and Exits with it); the structure of f's own loop is left out.
  void sweep(frame_context& ctx, int f);
  void differentiate_node(frame_context& ctx, int id);
  /// The gradient of the loop of frame f, a unit of ctx's frame: a backward loop that runs
  /// as many iterations, from the last to the first, on the values the forward loop pushed.
  void differentiate_loop(frame_context& ctx, int f);
  /// The iteration path of ctx's forward frame in that frame: empty at the root; in the loop
  /// body the gradient is taken in, [k], the body's iteration (a counter added to that loop,
  /// which is still being built: its Enter, Merge, Switch on the loop's LoopCond and
  /// NextIteration); in a backward loop's context, the forward loop's path.
  output forward_path(frame_context& ctx);
};

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE output frame_context::bring(output o) {
  int f = 0;
  if (o.node < pass_.n) {
    f = pass_.frames.out_frame(o.node);
  } else if (auto it = pass_.added_forward.find(o.node); it != pass_.added_forward.end()) {
    f = it->second;  // a loop's iteration count, added to the forward graph
  } else {
    return o;  // a node of the gradient: made in this frame
  }
  if (!parent_) {
    if (f != pass_.root_frame)
      fail(error_code::internal, "weft::add_gradients: ", target().at(o).describe(), " of a loop is used outside it");
    return o;
  }
  auto [it, fresh] = brought_.try_emplace(o);
  if (!fresh) return it->second;
  // What brings a forward value into a backward loop (an Enter, an AccumulatorPop, which must
  // share its accumulator's device with the forward loop's push) goes where the caller asked,
  // not to the device of the node whose gradient needs it.
  std::optional<graph::scope_guard> callers;
  if (graph* mg = base_.mutable_graph()) callers.emplace(mg->device_scope(pass_.callers_device));
  const node& p = target().at(o);
  if (f == frame_ && p.op() == "Enter" && p.attr<bool>("is_constant")) {
    it->second = scope_->invariant(parent_->bring(p.inputs()[0]));
  } else if (f == frame_) {
    const std::string name = p.name() + ":" + std::to_string(o.port) + "/" + std::to_string(target().size());
    it->second = base_.add_in_place("AccumulatorPop", {key_},
                                    {{"accumulator", name}, {"dtype", p.output_dtype(o.port)}, {"shape", p.output_shape(o.port)}});
    pushes_.emplace_back(o, name);
  } else {
    it->second = scope_->invariant(parent_->bring(o));
  }
  return it->second;
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void gradient_pass::differentiate_node(frame_context& ctx, int id) {
  const node& nd = g.at(id);
  // A node's gradient (and the sum of the partials reaching its outputs) goes to the device
  // the node was asked to run on, unless the caller's device scope names one: a model put on
  // a GPU trains there (TensorFlow's colocate_gradients_with_ops, by device).
  std::optional<graph::scope_guard> on_its_device;
  if (graph* target = base.mutable_graph(); target && !nd.device().empty() && target->current_device_scope().empty())
    on_its_device.emplace(target->device_scope(nd.device()));
  gradient_args<symbol> args{nd, {}, {}, {}, {}};
  bool any = false;
  for (int p = 0; p < nd.num_outputs(); ++p) {
    args.dy.push_back(total(nd.out(p)));
    any = any || args.dy.back().has_value();
  }
  bool inputs_on_path = false;
  for (const auto& in : nd.inputs()) inputs_on_path = inputs_on_path || on_path(in.node);
  if (!any || !inputs_on_path) return;
  const gradient_fn* rule = gradient_registry::global().find(nd.op());
  if (!rule)
    fail(error_code::unimplemented, "weft::add_gradients: no gradient is defined for ", nd.describe(),
         ", on the path from the differentiated inputs to the outputs");
  for (const auto& in : nd.inputs()) {
    args.x.emplace_back(ctx.symbols(), in);
    args.wanted.push_back(on_path(in.node) && differentiable(g.at(in).output_dtype(in.port)));
  }
  for (int p = 0; p < nd.num_outputs(); ++p) args.y.emplace_back(ctx.symbols(), nd.out(p));
  gradient_result<symbol> dx = (*rule)(args);
  if (dx.size() != nd.inputs().size())
    fail(error_code::internal, "weft::add_gradients: the gradient rule of ", nd.describe(), " returned ", dx.size(),
         " gradients for ", nd.inputs().size(), " inputs");
  for (std::size_t i = 0; i < dx.size(); ++i)
    if (dx[i] && args.wanted[i]) pending[nd.inputs()[i]].push_back(*dx[i]);
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void gradient_pass::sweep(frame_context& ctx, int f) {
  // In the frame the gradient is taken in (the root, or a loop body being built, whose loop
  // is not closed yet), the loop's own Enter, Exit, NextIteration and LoopCond are no units:
  // an iteration's gradient stops at its loop variables. (A cond's Switch and Merge in the
  // body are units, as at the root.)
  const bool in_body = f != 0 && f == root_frame;
  const std::vector<char>* structure = f == root_frame ? nullptr : &loop(f).structure;
  // Units: a node of f as its id, a loop nested in f as -(frame) - 1.
  auto unit_of = [&](int id) -> std::optional<int> {
    if (structure && (*structure)[static_cast<std::size_t>(id)]) return std::nullopt;
    if (in_body && frames.of(id) == f && frames.child(id) < 0) {
      const flow k = g.at(id).def().control;
      if (k == flow::enter || k == flow::exit || k == flow::next_iteration || k == flow::loop_cond) return std::nullopt;
    }
    const int c = frames.child(id);
    if (c >= 0) return frames.info(c).parent == f ? std::optional<int>(-c - 1) : std::nullopt;
    const int of = frames.of(id);
    if (of == f) return id;
    if (g.at(id).op() == "Exit" && frames.info(of).parent == f) return -of - 1;
    return std::nullopt;
  };
  std::vector<int> order;
  std::set<int> seen;
  std::vector<std::pair<int, bool>> stack;
  auto deps = [&](int u) {
    std::vector<int> ids;
    if (u >= 0) {
      ids.push_back(u);
    } else {
      for (int e = 0; e < n; ++e)
        if (frames.child(e) == -u - 1) ids.push_back(e);
    }
    std::vector<int> out;
    for (int id : ids) {
      for (const output& in : g.at(id).inputs())
        if (auto v = unit_of(in.node); v && *v != u && !(in.node > id && u >= 0)) out.push_back(*v);
      for (int c : g.at(id).control_inputs())
        if (auto v = unit_of(c); v && *v != u) out.push_back(*v);
    }
    return out;
  };
  for (int id = 0; id < n; ++id) {
    auto u0 = unit_of(id);
    if (!u0 || seen.count(*u0)) continue;
    stack.push_back({*u0, false});
    seen.insert(*u0);
    while (!stack.empty()) {
      auto [u, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        order.push_back(u);
        continue;
      }
      stack.push_back({u, true});
      for (int d : deps(u))
        if (seen.insert(d).second) stack.push_back({d, false});
    }
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (*it >= 0) {
      if (on_path(*it)) differentiate_node(ctx, *it);
    } else {
      differentiate_loop(ctx, -*it - 1);
    }
  }
}
#endif

#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE output gradient_pass::forward_path(frame_context& ctx) {
  if (!ctx.is_root()) return ctx.forward_path();
  if (root_frame == 0 || root_iteration.node >= 0) return root_iteration;
  graph* mg = base.mutable_graph();
  const passes::frame& body = frames.info(root_frame);
  if (!mg || body.depth != 1)
    fail(error_code::unimplemented, "weft::add_gradients: the gradient inside the body of loop '", body.name,
         "' reaches a loop nested in it, and '", body.name,
         "' is itself inside a loop; an iteration's gradient through a nested loop is built in the body of an outermost loop only");
  int loop_cond = -1;
  for (int id = 0; id < n && loop_cond < 0; ++id)
    if (frames.of(id) == root_frame && g.at(id).def().control == flow::loop_cond) loop_cond = id;
  if (loop_cond < 0) fail(error_code::internal, "weft::add_gradients: the loop '", body.name, "' has no LoopCond");
  // The counter: [0] entered from the root, [k + 1] to the next iteration; it leaves by no
  // Exit. Its Enter (of a root constant) is added to the graph directly and adopted as the
  // body's: a DSL lowering would hoist a node that reads nothing of the body.
  const output start = mg->op("Const", {}, {{"value", tensor::from_vector(std::vector<std::int64_t>{0})}, {"dtype", dtype::int64}}).out(0);
  const output enter =
      mg->op("Enter", {start}, {{"frame_name", body.name}, {"parallel_iterations", body.parallel_iterations}}).out(0);
  base.adopt(enter);
  const output merge = base.add_in_place("Merge", {enter, enter}, {});
  const output sw = base.add_in_place("Switch", {merge, g.at(loop_cond).out(0)}, {});
  root_iteration = base.add_in_place("Identity", {output{sw.node, 1}}, {});
  const output one = base.add_in_place("Const", {}, {{"value", tensor::from_vector(std::vector<std::int64_t>{1})}, {"dtype", dtype::int64}});
  mg->close_loop(merge.node, base.add_in_place("NextIteration", {base.add_in_place("Add", {root_iteration, one}, {})}, {}));
  return root_iteration;
}

WEFT_DETAIL_RUNTIME_INLINE void gradient_pass::differentiate_loop(frame_context& ctx, int f) {
  const loop_structure& L = loop(f);
  bool flows = false;
  for (const auto& v : L.vars)
    if (v.exit >= 0 && pending.count(g.at(v.exit).out(0))) flows = true;
  if (!flows) return;
  graph* mg = base.mutable_graph();
  if (!mg) fail(error_code::unimplemented, "weft::add_gradients: this graph's gradient builder cannot add the backward loop of '", L.frame_name, "'");
  const int depth = frames.info(f).depth;
  std::vector<std::int64_t> unit(static_cast<std::size_t>(depth), 0);
  unit.back() = 1;
  const tensor step_back = tensor::from_vector(unit);

  // The forward loop counts its iterations in a path variable [outer iterations..., i],
  // and pushes what the backward loop reads (closed below, once that is known).
  const output loop_cond = g.at(L.loop_cond).out(0);
  const int here = ctx.is_root() ? root_frame : ctx.forward_frame();  // the frame the loop is entered from
  output start = forward_constant(here, tensor::from_vector(std::vector<std::int64_t>{0}));
  if (here != 0)
    start = base.add_in_place("ConcatV2", {forward_path(ctx), start, forward_constant(here, tensor::scalar(std::int32_t{0}))},
                              {{"N", std::int64_t{2}}});
  const output path_enter =
      base.add_in_place("Enter", {start}, {{"frame_name", L.frame_name}, {"parallel_iterations", L.parallel_iterations}});
  const output path_merge = base.add_in_place("Merge", {path_enter, path_enter}, {});
  output path_switch = base.add_in_place("Switch", {path_merge, loop_cond}, {});
  const output path_exit = base.add_in_place("Exit", {path_switch}, {});
  added_forward[path_exit.node] = here;
  path_switch.port = 1;
  const output path_inside = base.add_in_place("Identity", {path_switch}, {});

  // The backward loop's variables: the path of the iteration it undoes, then the gradient
  // of each floating-point loop variable, then a sum per invariant the gradient reaches.
  std::vector<std::size_t> carried, summed;
  for (std::size_t k = 0; k < L.vars.size(); ++k)
    if (differentiable(g.at(L.vars[k].enter).output_dtype(0))) carried.push_back(k);
  for (std::size_t j = 0; j < L.invariants.size(); ++j) {
    const output in = g.at(L.invariants[j]).inputs()[0];
    if (from_x[static_cast<std::size_t>(in.node)] && differentiable(g.at(in).output_dtype(in.port))) summed.push_back(j);
  }
  std::vector<output> init{ctx.add("Sub", {path_exit, ctx.add("Const", {}, {{"value", step_back}, {"dtype", dtype::int64}})}, {})};
  for (std::size_t k : carried) {
    // The gradient at the loop's end: what reached the Exit, else zeros shaped as the
    // final value (as the initial one for a variable with no Exit).
    const auto& var = L.vars[k];
    const output last = var.exit >= 0 ? g.at(var.exit).out(0) : g.at(var.enter).inputs()[0];
    auto dy = var.exit >= 0 ? total(last) : std::nullopt;
    init.push_back(dy ? dy->out() : ctx.add("ZerosLike", {last}, {}));
  }
  for (std::size_t j : summed) init.push_back(ctx.add("ZerosLike", {g.at(L.invariants[j]).inputs()[0]}, {}));

  auto constant = [&](const tensor& t) { return ctx.add("Const", {}, {{"value", t}, {"dtype", t.dtype()}}); };
  frame_context* body_ctx = nullptr;
  auto cond = [&](loop_scope& s, const std::vector<output>& v) {
    auto last = mg->op("GatherV2", {v[0], s.invariant(constant(tensor::scalar(std::int64_t{depth - 1}))),
                                    s.invariant(constant(tensor::scalar(std::int32_t{0})))}).out(0);
    return mg->op("GreaterEqual", {last, s.invariant(constant(tensor::scalar(std::int64_t{0})))}).out(0);
  };
  auto body = [&](loop_scope& s, const std::vector<output>& v) {
    contexts.push_back(std::make_unique<frame_context>(*this, base, ctx, f, s, v[0], path_inside));
    frame_context& bc = *contexts.back();
    body_ctx = &bc;
    for (std::size_t c = 0; c < carried.size(); ++c) pending[L.vars[carried[c]].next].push_back(symbol(bc, v[1 + c]));
    sweep(bc, f);
    std::vector<output> next{bc.add("Sub", {v[0], bc.add("Const", {}, {{"value", step_back}, {"dtype", dtype::int64}})}, {})};
    for (std::size_t c = 0; c < carried.size(); ++c) {
      const auto& var = L.vars[carried[c]];
      auto a = total(g.at(var.sw).out(1));
      auto b = total(g.at(var.merge).out(0));
      next.push_back(a && b ? (*a + *b).out() : a ? a->out() : b ? b->out() : bc.add("ZerosLike", {v[1 + c]}, {}));
    }
    for (std::size_t s2 = 0; s2 < summed.size(); ++s2) {
      // Each partial is added to the sum; a ScatterNd's (GatherNd's gradient: a loop that
      // reads a row per iteration) is added in place, TensorScatterAdd writing only its
      // slices, rather than a tensor of zeros but for them.
      output acc = v[1 + carried.size() + s2];
      if (auto it = pending.find(g.at(L.invariants[summed[s2]]).out(0)); it != pending.end()) {
        for (const symbol& part : it->second) {
          const output p = part.out();
          const node& pn = part.producer();
          if (p.node >= n && pn.op() == "ScatterNd") acc = bc.add("TensorScatterAdd", {acc, pn.inputs()[0], pn.inputs()[1]}, {});
          else acc = bc.add("Add", {acc, p}, {});
        }
      }
      next.push_back(acc);
    }
    return next;
  };
  while_options options;
  options.name = "gradients/" + L.frame_name + "_grad";
  options.parallel_iterations = L.parallel_iterations;
  std::vector<output> exits = while_loop(*mg, init, cond, body, options);
  for (const output& e : exits) base.adopt(e);  // made in ctx's frame (a loop body's, for a DSL lowering)
  for (std::size_t c = 0; c < carried.size(); ++c)
    pending[g.at(L.vars[carried[c]].enter).inputs()[0]].push_back(symbol(ctx.symbols(), exits[1 + c]));
  for (std::size_t s2 = 0; s2 < summed.size(); ++s2)
    pending[g.at(L.invariants[summed[s2]]).inputs()[0]].push_back(symbol(ctx.symbols(), exits[1 + carried.size() + s2]));

  // Close the forward path: push, in order, what the backward loop pops, then count.
  output key = path_inside;
  for (const auto& [value, name] : body_ctx->pushes())
    key = base.add_in_place("AccumulatorPush", {key, value}, {{"accumulator", name}});
  const output next = base.add_in_place("Add", {key, forward_constant(f, step_back)}, {});
  mg->close_loop(path_merge.node, base.add_in_place("NextIteration", {next}, {}));
}
#endif

}  // namespace detail

/// Adds the gradients of sum(ys[i] * dys[i]) with respect to each of xs to the graph behind
/// `b` (dys absent or empty: ones, the gradient of the sum of ys). Returns one output per x.
/// Throws weft::error naming the node and op when a path from an x to a y crosses an op
/// with no gradient rule. Through a while loop (graph/control_flow.hpp), the gradient is a
/// backward loop that runs the same number of iterations in reverse order; the forward loop
/// pushes the values it needs, per iteration, for the step. Through a cond, the gradient
/// flows into the branch that ran.
std::vector<output> add_gradients(gradient_builder& b, const std::vector<output>& ys, const std::vector<output>& xs,
                                  const std::vector<std::optional<output>>& dys = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<output> add_gradients(gradient_builder& b, const std::vector<output>& ys, const std::vector<output>& xs,
                                                             const std::vector<std::optional<output>>& dys) {
  ops::register_standard_ops();
  gradients::register_standard_gradients();
  const graph& g = b.target();
  if (!dys.empty() && dys.size() != ys.size())
    fail(error_code::invalid_argument, "weft::add_gradients: ", dys.size(), " output gradients for ", ys.size(), " outputs");
  detail::gradient_pass pass(b);
  const int n = pass.n;
  // Every x and y inside one loop body: the gradient of an iteration, built in that body
  // (where the builder can put nodes there: the DSL's grad inside a while_loop body).
  const int inner = ys.empty() ? 0 : pass.frames.out_frame(g.at(ys[0]).id());
  bool one_body = inner != 0;
  for (const auto& o : ys) one_body = one_body && pass.frames.out_frame(g.at(o).id()) == inner;
  for (const auto& o : xs) one_body = one_body && pass.frames.out_frame(g.at(o).id()) == inner;
  if (one_body && !b.builds_in_loop_body())
    fail(error_code::invalid_argument, "weft::add_gradients: ", g.at(ys[0]).describe(),
         " and the xs are inside a loop; for the gradient of each iteration, pass the body's loop_scope "
         "(add_gradients(g, scope, ys, xs), from the body function) or use the DSL's grad inside the while_loop body");
  if (one_body) {
    pass.root_frame = inner;
    // The body's nodes and those of the loops nested in it (their LoopConds, the values their
    // backward loops pop) are the builder's own: a DSL lowering enters anything else from
    // outside the body.
    for (int id = 0; id < n; ++id) {
      int f = pass.frames.of(id);
      while (f > 0 && f != inner) f = pass.frames.info(f).parent;
      if (f == inner) b.adopt(g.at(id).out(0));
    }
  } else {
    for (const auto& x : xs)
      if (pass.frames.out_frame(g.at(x).id()) != 0)  // g.at names a bad id
        fail(error_code::invalid_argument, "weft::add_gradients: ", g.at(x).describe(),
             " is inside a loop; differentiate with respect to a value outside it");
    for (const auto& y : ys)
      if (pass.frames.out_frame(g.at(y).id()) != 0)
        fail(error_code::invalid_argument, "weft::add_gradients: ", g.at(y).describe(),
             " is inside a loop; differentiate a value that leaves it through an Exit");
  }
  // Nodes that depend on an x, and among them those some y depends on. Ids are
  // topological but for a loop's back edges, hence the passes until nothing changes.
  auto& from_x = pass.from_x;
  auto& to_y = pass.to_y;
  from_x.assign(static_cast<std::size_t>(n), 0);
  to_y.assign(static_cast<std::size_t>(n), 0);
  for (const auto& x : xs) from_x[static_cast<std::size_t>(x.node)] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (int id = 0; id < n; ++id)
      if (!from_x[static_cast<std::size_t>(id)])
        for (const auto& in : g.at(id).inputs())
          if (from_x[static_cast<std::size_t>(in.node)]) {
            from_x[static_cast<std::size_t>(id)] = 1;
            changed = true;
            break;
          }
  }
  for (const auto& y : ys) to_y[static_cast<std::size_t>(y.node)] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (int id = n - 1; id >= 0; --id)
      if (to_y[static_cast<std::size_t>(id)])
        for (const auto& in : g.at(id).inputs())
          if (!to_y[static_cast<std::size_t>(in.node)]) to_y[static_cast<std::size_t>(in.node)] = 1, changed = true;
  }

  detail::frame_context root(pass, b);
  for (std::size_t i = 0; i < ys.size(); ++i) {
    symbol y(root.symbols(), ys[i]);
    if (!detail::differentiable(y.type()))
      fail(error_code::invalid_argument, "weft::add_gradients: output ", g.at(ys[i]).describe(), " has dtype ", y.type(),
           "; gradients need a floating-point output");
    // The seed: a constant 1 for a scalar y (so that a gradient fetched alone does not
    // compute y), else ones of y's shape.
    const bool scalar = y.shape().rank_known() && y.shape().rank() == 0;
    pass.pending[ys[i]].push_back(!dys.empty() && dys[i] ? symbol(root.symbols(), *dys[i]) : scalar ? y.scalar(1.0) : ones_like(y));
  }
  pass.sweep(root, pass.root_frame);
  std::vector<output> result;
  for (const auto& x : xs) {
    auto s = pass.total(x);
    result.push_back(s ? s->out() : zeros_like(symbol(root.symbols(), x)).out());
  }
  return result;
}
#endif

namespace detail {
/// The builder of add_gradients on a graph built op by op: nodes named "gradients/<op>",
/// equal stateless ones added once. With a pivot (a loop body's), a node with no input runs
/// after it, so that it runs in the body's frame.
struct graph_gradient_builder final : gradient_builder {
  graph& g;
  int pivot;
  /// Equal stateless nodes are added once (a rule's constants, the Shape of one tensor).
  std::map<std::pair<std::string, std::vector<output>>, std::vector<std::pair<attr_map, output>>> added;
  graph_gradient_builder(graph& gr, int body_pivot) : g(gr), pivot(body_pivot) {}
  const graph& target() const override { return g; }
  graph* mutable_graph() override { return &g; }
  bool builds_in_loop_body() const override { return pivot >= 0; }
  output add(std::string_view op, std::vector<output> inputs, attr_map attrs) override {
    auto& same = added[{std::string(op), inputs}];
    for (const auto& [a, o] : same)
      if (a == attrs && !g.at(o).def().stateful) return o;  // a stateful node is never merged
    auto scope = g.name_scope("gradients");  // auto-named, unique within the current scope
    node_options options;
    if (inputs.empty() && pivot >= 0) options.after({pivot});
    output o = g.op(op, inputs, attrs, std::move(options)).out(0);
    same.emplace_back(std::move(attrs), o);
    return o;
  }
};
}  // namespace detail

/// The same on a graph built op by op: gradient nodes are named "gradients/<op>", made unique.
std::vector<output> add_gradients(graph& g, const std::vector<output>& ys, const std::vector<output>& xs,
                                  const std::vector<std::optional<output>>& dys = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<output> add_gradients(graph& g, const std::vector<output>& ys, const std::vector<output>& xs,
                                                             const std::vector<std::optional<output>>& dys) {
  detail::graph_gradient_builder b(g, -1);
  return add_gradients(b, ys, xs, dys);
}
#endif

/// The gradient of one iteration inside a while loop's body built op by op (graph/control_flow.hpp):
/// ys and xs are values of the body whose loop_scope is `body` (an outer value enters with
/// body.invariant()); the gradient's nodes go in the body and run each iteration, stopping
/// at the iteration's loop variables. Call it from the body function.
std::vector<output> add_gradients(graph& g, const loop_scope& body, const std::vector<output>& ys, const std::vector<output>& xs,
                                  const std::vector<std::optional<output>>& dys = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<output> add_gradients(graph& g, const loop_scope& body, const std::vector<output>& ys,
                                                             const std::vector<output>& xs,
                                                             const std::vector<std::optional<output>>& dys) {
  if (body.pivot() < 0)
    fail(error_code::invalid_argument, "weft::add_gradients: the loop scope of '", body.frame(),
         "' has no body yet (call it from the loop's body function)");
  detail::graph_gradient_builder b(g, body.pivot());
  return add_gradients(b, ys, xs, dys);
}
#endif

}  // namespace weft

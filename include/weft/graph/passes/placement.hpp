/// @file
/// Placement (whitepaper §3.2.1): which device of a cluster each node of a run runs on.
///
/// 1. Feasible devices per node: those its requested device (node_options::on, device_scope)
///    matches that have a kernel for its op and dtypes (the caller's kernel_check; nodes the
///    executor runs itself, control flow, fit everywhere). With soft placement (TensorFlow's
///    allow_soft_placement) a node whose request leaves no feasible device falls back to the
///    feasible devices of the requested type, else to every feasible device; without it,
///    that is an error naming the node, its request and the devices.
/// 2. Colocation groups, merged with union-find: a node and the node it is colocated with
///    (node_options::colocate, graph::colocate_with), a node and the producer of every
///    reference it takes (a variable and the Assign and Apply* ops that update it, as in
///    TensorFlow), and, until loops cross devices, the nodes of a loop frame with its Enters,
///    Exits and inner loops. A group's feasible set is the intersection of its members'; an
///    empty one is an error naming each member's devices.
/// 3. The simulated greedy placer (placer::greedy): walks the nodes in topological order
///    simulating a step and puts each on the feasible device where it would finish first,
///    counting the time its inputs take to reach that device (cost_model.hpp: compute time,
///    and transfers over the cluster's links; a tensor moves to a device once, for all its
///    users there) and the time the device is busy with earlier nodes. A group goes where its
///    first simulated member goes. Sources that cost nothing but the node overhead (variables,
///    constants) are placed with their first consumer rather than on their own, so that
///    weights start on the device that first reads them. Ties go to the lower device index:
///    the result is deterministic.
///    The rule-based placer (placer::rules, TensorFlow's): constraints and colocation, then
///    the default device when the group may run there, else its first feasible device, but
///    for free sources, which go with their first consumer as above; it is simulated too, so
///    the two report predicted times alike.
///
/// The simulation runs each device one node at a time, runs a loop's body once, and does not
/// model contention on links; its predicted step time is the last finish. A placement's
/// report() prints, per node, the device, its simulated start and finish and the finish it
/// would have had on each feasible device.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/framework/device_name.hpp>
#include <weft/graph/graph.hpp>
#include <weft/graph/passes/cost_model.hpp>
#include <weft/graph/passes/frames.hpp>

namespace weft::passes {

/// Which placer: TensorFlow's rules (constraints and colocation, then the default device when
/// a group may run there, else its first feasible one), or the greedy simulation over the
/// cost model (whitepaper §3.2.1).
enum class placer { rules, greedy };

/// "greedy" or "rules".
inline const char* name(placer p) noexcept { return p == placer::greedy ? "greedy" : "rules"; }

/// How to place a graph.
struct placement_options {
  placer algorithm = placer::greedy;  ///< which placer
  bool soft = false;        ///< allow_soft_placement
  int default_device = 0;   ///< the rule-based placer's device for unconstrained groups
};

/// Whether node n has a kernel on devices of type `device_type`: an empty string when it has,
/// else why not (the kernel registry's message, which names the node and its dtypes).
using kernel_check = std::function<std::string(const node& n, const std::string& device_type)>;

/// One node's place in the simulated step.
struct node_placement {
  int node = -1;                 ///< the node's id
  int device = -1;               ///< the cluster device it is placed on
  double start = 0;              ///< when it starts: simulated seconds from the start of the step
  double finish = 0;             ///< when it finishes
  double compute = 0;            ///< its compute time on the chosen device
  /// When it would have finished on each device of the cluster (infinity where it may not run).
  std::vector<double> finish_on;
};

/// A placement of a graph's nodes on a cluster's devices, with the simulated step it predicts.
struct placement {
  placer algorithm = placer::greedy;  ///< the placer that made it
  std::vector<std::string> device_names;  ///< the cluster's short names
  std::vector<int> device_of;             ///< per graph node id; -1 for a node not placed
  std::vector<node_placement> nodes;      ///< in the order the simulation placed them
  std::vector<double> busy_seconds;       ///< per device: the compute time placed there
  double predicted_seconds = 0;           ///< the simulated step: the last finish

  /// Per node (in graph order): device, simulated start and finish, and the finish on each
  /// device where it could have run.
  std::string report(const graph& g) const {
    std::ostringstream out;
    auto us = [](double s) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", s * 1e6);
      return std::string(buf);
    };
    out << name(algorithm) << " placement of " << nodes.size() << " nodes on " << device_names.size()
        << " devices: predicted step " << us(predicted_seconds) << " us\n";
    for (std::size_t d = 0; d < device_names.size(); ++d)
      out << "  " << device_names[d] << ": " << us(busy_seconds[d]) << " us of compute\n";
    std::vector<const node_placement*> order;
    for (const auto& p : nodes) order.push_back(&p);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->node < b->node; });
    std::size_t width = 4;
    for (auto* p : order) width = std::max(width, g.at(p->node).name().size() + g.at(p->node).op().size() + 3);
    out << "  " << pad("node", width) << "  device   start us   finish us  finish us on each device\n";
    for (auto* p : order) {
      const node& n = g.at(p->node);
      out << "  " << pad(n.name() + " (" + n.op() + ")", width) << "  " << pad(device_names[static_cast<std::size_t>(p->device)], 7)
          << "  " << pad(us(p->start), 9) << "  " << pad(us(p->finish), 10) << " ";
      for (std::size_t d = 0; d < p->finish_on.size(); ++d)
        if (p->finish_on[d] < std::numeric_limits<double>::infinity())
          out << ' ' << device_names[d] << ' ' << us(p->finish_on[d]);
      out << '\n';
    }
    return out.str();
  }

 private:
  static std::string pad(std::string s, std::size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
  }
};

namespace detail {

struct union_find {
  std::vector<int> parent;
  explicit union_find(int n) : parent(static_cast<std::size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[static_cast<std::size_t>(x)] != x) {
      parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
      x = parent[static_cast<std::size_t>(x)];
    }
    return x;
  }
  void join(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);  // the lower id leads
  }
};

inline std::string device_list(const cluster& c, const std::vector<char>& allowed) {
  std::string out;
  for (int d = 0; d < c.size(); ++d)
    if (allowed[static_cast<std::size_t>(d)]) out += (out.empty() ? "" : ", ") + c.short_name(d);
  return out.empty() ? "none" : out;
}

}  // namespace detail

/// Places the needed nodes of g on the devices of c. is_fed(o): whether output o is fed (a
/// fed value is on every device at the start of the step); rep: CSE's stand-ins (empty: each
/// node stands for itself), so that an input is read from the node that computes it.
placement place(const graph& g, const std::vector<bool>& needed, const cluster& c, const cost_model& costs,
                const kernel_check& has_kernel, const placement_options& options,
                const std::function<bool(output)>& is_fed = {}, const std::vector<int>& rep = {});
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE placement place(const graph& g, const std::vector<bool>& needed, const cluster& c, const cost_model& costs,
                                           const kernel_check& has_kernel, const placement_options& options,
                                           const std::function<bool(output)>& is_fed, const std::vector<int>& rep) {
  const int count = g.size();
  const int num_devices = c.size();
  if (static_cast<int>(needed.size()) != count)
    fail(error_code::invalid_argument, "place: needed has ", needed.size(), " entries for a graph of ", count, " nodes");
  if (options.default_device < 0 || options.default_device >= num_devices)
    fail(error_code::invalid_argument, "placement_options::default_device ", options.default_device, " is not one of the ",
         num_devices, " devices");
  auto is_needed = [&](int id) { return needed[static_cast<std::size_t>(id)]; };
  auto stand_in = [&](int id) { return rep.empty() ? id : rep[static_cast<std::size_t>(id)]; };
  auto fed = [&](output o) { return is_fed && is_fed(o); };
  const std::vector<char> all(static_cast<std::size_t>(num_devices), 1);

  // 1. Feasible devices per node.
  std::vector<std::vector<char>> feasible(static_cast<std::size_t>(count));
  for (int id = 0; id < count; ++id) {
    if (!is_needed(id)) continue;
    const node& n = g.at(id);
    std::vector<char> matched = all;
    std::optional<device_name> spec;
    if (!n.device().empty()) {
      try {
        spec = device_name::parse(n.device());
      } catch (const error& e) {
        fail(error_code::invalid_argument, n.describe(), ": ", e.what());
      }
      for (int d = 0; d < num_devices; ++d) matched[static_cast<std::size_t>(d)] = spec->matches(c.parsed(d));
    }
    std::vector<char> runs(static_cast<std::size_t>(num_devices), 1);
    std::vector<std::string> why_not(static_cast<std::size_t>(num_devices));  // by device: the kernel check's answer
    if (n.def().control == flow::plain && !n.def().feed)
      for (int d = 0; d < num_devices; ++d) {
        int same = 0;  // the first device of this type: asked once per type
        while (c.type(same) != c.type(d)) ++same;
        auto& why = why_not[static_cast<std::size_t>(d)];
        why = same < d ? why_not[static_cast<std::size_t>(same)] : has_kernel ? has_kernel(n, c.type(d)) : std::string();
        runs[static_cast<std::size_t>(d)] = why.empty();
      }
    std::vector<char> ok(static_cast<std::size_t>(num_devices));
    for (int d = 0; d < num_devices; ++d) ok[static_cast<std::size_t>(d)] = matched[static_cast<std::size_t>(d)] && runs[static_cast<std::size_t>(d)];
    auto none = [](const std::vector<char>& v) { return std::find(v.begin(), v.end(), 1) == v.end(); };
    if (none(ok) && options.soft && !none(runs)) {
      ok = runs;
      if (spec && spec->type) {
        std::vector<char> same_type(static_cast<std::size_t>(num_devices));
        for (int d = 0; d < num_devices; ++d) same_type[static_cast<std::size_t>(d)] = runs[static_cast<std::size_t>(d)] && c.type(d) == *spec->type;
        if (!none(same_type)) ok = same_type;
      }
    }
    if (none(ok)) {
      std::string names;
      for (int d = 0; d < num_devices; ++d) names += (d ? ", " : "") + c.short_name(d);
      if (none(matched))
        fail(error_code::invalid_argument, n.describe(), " requests device '", n.device(),
             "', which matches none of the devices (", names, ")");
      // A kernel is missing on every device it may use: the registry's words for the first.
      for (int d = 0; d < num_devices; ++d)
        if (matched[static_cast<std::size_t>(d)]) {
          const std::string& why = why_not[static_cast<std::size_t>(d)];
          if (n.device().empty()) throw error(error_code::not_found, why);
          throw error(error_code::not_found, why + "; it requests device '" + n.device() + "' (" +
                                                 detail::device_list(c, matched) + ")" +
                                                 (none(runs) ? "" : ", and soft placement is off"));
        }
    }
    feasible[static_cast<std::size_t>(id)] = std::move(ok);
  }

  // 2. Colocation groups.
  detail::union_find groups(count);
  for (int id = 0; id < count; ++id) {
    if (!is_needed(id)) continue;
    const node& n = g.at(id);
    if (!n.colocation().empty()) {
      const node& root = g[n.colocation()];
      groups.join(id, stand_in(root.id()));
    }
    for (int i = 0; i < n.num_inputs(); ++i) {
      const output in = n.inputs()[static_cast<std::size_t>(i)];
      if (n.input_is_ref(i) && !fed(in)) groups.join(id, stand_in(in.node));
    }
  }
  // A loop's control flow (its Enters, Merges, Switches, LoopCond, NextIterations and Exits)
  // goes together, with every node of the loops inside it; the other nodes of its body may
  // go anywhere (partitioning gives each other device a control loop of its own).
  bool loops = false;
  for (int id = 0; id < count && !loops; ++id) loops = is_needed(id) && g.at(id).def().control == flow::enter;
  if (loops) {
    const frame_map frames = find_frames(g, false);
    std::vector<int> leader(frames.frames().size(), -1);
    auto join_frame = [&](int id, int f) {
      if (f <= 0) return;
      int& l = leader[static_cast<std::size_t>(f)];
      if (l < 0) l = id;
      else groups.join(id, l);
    };
    for (int id = 0; id < count; ++id) {
      if (!is_needed(id)) continue;
      const int f = frames.of(id);
      if (g.at(id).def().control != flow::plain) join_frame(id, f), join_frame(id, frames.child(id));
      else if (f > 0 && frames.info(f).depth >= 2) join_frame(id, f);
    }
  }
  std::vector<std::vector<char>> group_ok(static_cast<std::size_t>(count));
  std::vector<std::vector<int>> members(static_cast<std::size_t>(count));
  for (int id = 0; id < count; ++id) {
    if (!is_needed(id)) continue;
    const int r = groups.find(id);
    members[static_cast<std::size_t>(r)].push_back(id);
    auto& ok = group_ok[static_cast<std::size_t>(r)];
    if (ok.empty()) ok = all;
    for (int d = 0; d < num_devices; ++d) ok[static_cast<std::size_t>(d)] &= feasible[static_cast<std::size_t>(id)][static_cast<std::size_t>(d)];
  }
  for (int r = 0; r < count; ++r) {
    const auto& ok = group_ok[static_cast<std::size_t>(r)];
    if (ok.empty() || std::find(ok.begin(), ok.end(), 1) != ok.end()) continue;
    std::string detail_text;
    for (int m : members[static_cast<std::size_t>(r)])
      detail_text += "; " + g.at(m).describe() + " may run on " + detail::device_list(c, feasible[static_cast<std::size_t>(m)]);
    fail(error_code::invalid_argument, "nodes colocated with ", g.at(r).describe(),
         " (by colocation, by taking its reference or by sharing a loop) have no device in common", detail_text);
  }

  // 3. The simulation.
  placement result;
  result.algorithm = options.algorithm;
  for (int d = 0; d < num_devices; ++d) result.device_names.push_back(c.short_name(d));
  result.device_of.assign(static_cast<std::size_t>(count), -1);
  result.busy_seconds.assign(static_cast<std::size_t>(num_devices), 0.0);
  std::vector<int> group_device(static_cast<std::size_t>(count), -1);
  std::vector<double> device_free(static_cast<std::size_t>(num_devices), 0.0);
  std::vector<double> finish(static_cast<std::size_t>(count), 0.0);
  // A tensor's arrival on a device it was sent to, by node, then port x device (-1: not sent).
  std::vector<std::vector<double>> arrival(static_cast<std::size_t>(count));
  auto arrived = [&](output o, int d) -> double& {
    auto& a = arrival[static_cast<std::size_t>(o.node)];
    if (a.empty()) a.assign(static_cast<std::size_t>(g.at(o.node).num_outputs() * num_devices), -1.0);
    return a[static_cast<std::size_t>(o.port * num_devices + d)];
  };
  constexpr double never = std::numeric_limits<double>::infinity();

  auto first_ok = [&](const std::vector<char>& ok) {
    return static_cast<int>(std::find(ok.begin(), ok.end(), 1) - ok.begin());
  };
  auto rule_device = [&](int r) {
    const auto& ok = group_ok[static_cast<std::size_t>(r)];
    return ok[static_cast<std::size_t>(options.default_device)] ? options.default_device : first_ok(ok);
  };
  // A free source: a node with nothing to wait for that costs only the overhead; both placers
  // put its group where its first consumer goes (TensorFlow's placer does so for a generator
  // with one consumer).
  auto is_free_source = [&](int id) {
    const node& n = g.at(id);
    if (!costs.overhead_only(id) || !n.control_inputs().empty()) return false;
    for (const output& in : n.inputs())
      if (!fed(in)) return false;
    return true;
  };
  auto commit = [&](int id, int d, double start, std::vector<double> finish_on) {
    const double t = costs.compute_seconds(id, c, d);
    node_placement p{id, d, start, start + t, t, std::move(finish_on)};
    result.device_of[static_cast<std::size_t>(id)] = d;
    finish[static_cast<std::size_t>(id)] = p.finish;
    device_free[static_cast<std::size_t>(d)] = p.finish;
    result.busy_seconds[static_cast<std::size_t>(d)] += t;
    result.nodes.push_back(std::move(p));
  };
  // Places a free source now, on d (its group's device once that is known). It runs at the
  // step's start, as every node with no inputs does, after the free sources placed on d
  // before it; the later nodes of a busy device are not pushed back by it.
  std::vector<double> sources_free(static_cast<std::size_t>(num_devices), 0.0);
  auto place_source = [&](int id, int d) {
    std::vector<double> finish_on(static_cast<std::size_t>(num_devices), never);
    const double start = sources_free[static_cast<std::size_t>(d)];
    finish_on[static_cast<std::size_t>(d)] = start + costs.compute_seconds(id, c, d);
    const double busy = device_free[static_cast<std::size_t>(d)];
    commit(id, d, start, std::move(finish_on));
    sources_free[static_cast<std::size_t>(d)] = finish[static_cast<std::size_t>(id)];
    device_free[static_cast<std::size_t>(d)] = std::max(busy, finish[static_cast<std::size_t>(id)]);
  };
  // Fixes group r on d and places its free sources there.
  auto fix_group = [&](int r, int d) {
    group_device[static_cast<std::size_t>(r)] = d;
    for (int m : members[static_cast<std::size_t>(r)])
      if (is_free_source(m) && result.device_of[static_cast<std::size_t>(m)] < 0) place_source(m, d);
  };
  // When input `in` (already resolved to its stand-in) would be on device d.
  auto ready_on = [&](output in, int d) -> double {
    const int p = in.node;
    int from = result.device_of[static_cast<std::size_t>(p)];
    if (from < 0) {  // a free source not placed yet: it would go where its group goes, or here
      const int r = groups.find(p);
      from = group_device[static_cast<std::size_t>(r)];
      if (from < 0) from = group_ok[static_cast<std::size_t>(r)][static_cast<std::size_t>(d)] ? d : first_ok(group_ok[static_cast<std::size_t>(r)]);
      const double made = sources_free[static_cast<std::size_t>(from)] + costs.compute_seconds(p, c, from);
      return from == d ? made : made + c.transfer_seconds(costs.output_bytes(in), from, d);
    }
    if (from == d) return finish[static_cast<std::size_t>(p)];
    if (const double t = arrived(in, d); t >= 0) return t;
    return finish[static_cast<std::size_t>(p)] + c.transfer_seconds(costs.output_bytes(in), from, d);
  };

  for (int id = 0; id < count; ++id) {
    if (!is_needed(id) || result.device_of[static_cast<std::size_t>(id)] >= 0) continue;
    if (is_free_source(id) && group_device[static_cast<std::size_t>(groups.find(id))] < 0) continue;  // placed with a consumer
    const node& n = g.at(id);
    const int r = groups.find(id);
    // The inputs this node waits for, from earlier nodes (a loop's back edge is left out).
    std::vector<output> inputs;
    for (const output& raw : n.inputs()) {
      if (fed(raw)) continue;
      const output in{stand_in(raw.node), raw.port};
      if (in.node < id || result.device_of[static_cast<std::size_t>(in.node)] >= 0) inputs.push_back(in);
    }
    std::vector<int> controls;
    for (int raw : n.control_inputs()) {
      const int p = stand_in(raw);
      if (p < id) controls.push_back(p);
    }
    std::vector<double> finish_on(static_cast<std::size_t>(num_devices), never);
    std::vector<double> start_on(static_cast<std::size_t>(num_devices), never);
    const int fixed = group_device[static_cast<std::size_t>(r)] >= 0 ? group_device[static_cast<std::size_t>(r)]
                      : options.algorithm == placer::rules     ? rule_device(r)
                                                               : -1;
    for (int d = 0; d < num_devices; ++d) {
      if (!group_ok[static_cast<std::size_t>(r)][static_cast<std::size_t>(d)] || (fixed >= 0 && d != fixed)) continue;
      double ready = device_free[static_cast<std::size_t>(d)];
      for (const output& in : inputs) ready = std::max(ready, ready_on(in, d));
      for (int p : controls) {
        const int from = result.device_of[static_cast<std::size_t>(p)];
        ready = std::max(ready, finish[static_cast<std::size_t>(p)] + (from >= 0 && from != d ? c.link(from, d).latency_seconds : 0));
      }
      start_on[static_cast<std::size_t>(d)] = ready;
      finish_on[static_cast<std::size_t>(d)] = ready + costs.compute_seconds(id, c, d);
    }
    int best = -1;
    for (int d = 0; d < num_devices; ++d)
      if (finish_on[static_cast<std::size_t>(d)] < never &&
          (best < 0 || finish_on[static_cast<std::size_t>(d)] < finish_on[static_cast<std::size_t>(best)] * (1 - 1e-12)))
        best = d;
    if (group_device[static_cast<std::size_t>(r)] < 0) fix_group(r, best);
    // The free sources it reads go where their groups go, here when not decided yet.
    for (const output& in : inputs)
      if (result.device_of[static_cast<std::size_t>(in.node)] < 0) {
        const int pr = groups.find(in.node);
        if (group_device[static_cast<std::size_t>(pr)] < 0)
          fix_group(pr, group_ok[static_cast<std::size_t>(pr)][static_cast<std::size_t>(best)] ? best : first_ok(group_ok[static_cast<std::size_t>(pr)]));
        if (result.device_of[static_cast<std::size_t>(in.node)] < 0) place_source(in.node, group_device[static_cast<std::size_t>(pr)]);
      }
    // Its inputs from other devices arrive once (recorded for its other users there).
    double start = device_free[static_cast<std::size_t>(best)];
    for (const output& in : inputs) {
      const int from = result.device_of[static_cast<std::size_t>(in.node)];
      double t = finish[static_cast<std::size_t>(in.node)];
      if (from != best) {
        double& when = arrived(in, best);
        if (when < 0) when = t + c.transfer_seconds(costs.output_bytes(in), from, best);
        t = when;
      }
      start = std::max(start, t);
    }
    for (int p : controls) {
      const int from = result.device_of[static_cast<std::size_t>(p)];
      start = std::max(start, finish[static_cast<std::size_t>(p)] + (from >= 0 && from != best ? c.link(from, best).latency_seconds : 0));
    }
    finish_on[static_cast<std::size_t>(best)] = start + costs.compute_seconds(id, c, best);
    commit(id, best, start, std::move(finish_on));
  }
  // Free sources nothing needed reads (a variable fetched alone, say).
  for (int id = 0; id < count; ++id)
    if (is_needed(id) && result.device_of[static_cast<std::size_t>(id)] < 0) {
      const int r = groups.find(id);
      if (group_device[static_cast<std::size_t>(r)] < 0) fix_group(r, rule_device(r));
      if (result.device_of[static_cast<std::size_t>(id)] < 0) place_source(id, group_device[static_cast<std::size_t>(r)]);
    }
  for (const auto& p : result.nodes) result.predicted_seconds = std::max(result.predicted_seconds, p.finish);
  return result;
}
#endif

}  // namespace weft::passes

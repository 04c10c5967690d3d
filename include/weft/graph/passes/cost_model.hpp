/// @file
/// The cost model the placer simulates with (whitepaper §3.2.1): per node, the sizes of its
/// outputs and its compute time on a device; per pair of devices, the time to move a tensor.
///
/// A cluster describes devices as the placer sees them: a full name, the arithmetic rate
/// and memory bandwidth the device sustains, and a fixed cost per node; links between two
/// devices have a latency and a bandwidth. The session describes its own devices (and lets
/// a user give other figures); tests describe clusters that do not exist.
///
/// Compute time of node n on device d: the time measured for n on d's type when there is one
/// (set_measured, or the session's record of traced steps), else
///   overhead(d) + max(flops(n) / flops_per_second(d), bytes(n) / memory_bytes_per_second(d)),
/// where flops(n) is the op's cost rule (op_def::flops_fn: 2mnk for MatMul, the taps of a
/// convolution) or one per element of its largest tensor, and bytes(n) is what it reads and
/// writes. Nodes the executor runs without a kernel (control flow), constants, variables and
/// the ops marked cheap cost the overhead alone. Output sizes come from the graph's shapes,
/// refined with the shapes of fed values when they are known; a dim still unknown counts as
/// cost_model_options::unknown_dim.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/shape.hpp>
#include <weft/framework/shape_context.hpp>
#include <weft/graph/graph.hpp>
#include <weft/framework/device_name.hpp>

namespace weft::passes {

/// A device as the placer sees it.
struct device_spec {
  std::string name;  ///< a full name, /job:J/replica:R/task:T/device:TYPE:N
  double flops_per_second = 50e9;         ///< arithmetic throughput
  double memory_bytes_per_second = 20e9;  ///< memory bandwidth
  double node_overhead_seconds = 1e-6;    ///< what running any node costs
};

/// A one-way link between two devices: a transfer of b bytes takes latency + b / bandwidth.
struct link_spec {
  double latency_seconds = 2e-6;   ///< the cost of any transfer
  double bytes_per_second = 10e9;  ///< bandwidth
};

/// Devices and the links between them. Every pair of distinct devices has a link: the
/// default one unless set_link gave it its own; a device to itself costs nothing.
class cluster {
 public:
  /// The devices (full names, each once, positive speeds) with default_link between every pair.
  explicit cluster(std::vector<device_spec> devices, link_spec default_link = {})
      : devices_(std::move(devices)), default_link_(default_link) {
    if (devices_.empty()) fail(error_code::invalid_argument, "cluster: no devices");
    for (const auto& d : devices_) {
      device_name parsed = device_name::parse(d.name);
      if (!parsed.full())
        fail(error_code::invalid_argument, "cluster: device '", d.name,
             "' needs a full name, /job:J/replica:R/task:T/device:TYPE:N (device_name::local(\"CPU\", 0).str(), say)");
      if (!(d.flops_per_second > 0) || !(d.memory_bytes_per_second > 0) || !(d.node_overhead_seconds >= 0))
        fail(error_code::invalid_argument, "cluster: device '", d.name,
             "' needs positive flops_per_second and memory_bytes_per_second and a non-negative node_overhead_seconds");
      for (const auto& p : parsed_)
        if (p.str() == parsed.str()) fail(error_code::invalid_argument, "cluster: device '", d.name, "' is listed twice");
      parsed_.push_back(std::move(parsed));
    }
    check(default_link_, "the default link");
  }

  /// How many devices.
  int size() const noexcept { return static_cast<int>(devices_.size()); }
  /// Device i.
  const device_spec& device(int i) const { return devices_.at(static_cast<std::size_t>(i)); }
  /// Device i's name, parsed.
  const device_name& parsed(int i) const { return parsed_.at(static_cast<std::size_t>(i)); }
  /// Device i's type ("CPU", "GPU").
  const std::string& type(int i) const { return *parsed(i).type; }
  /// The index of the device named `name` (a full name), or -1.
  int find(const std::string& name) const {
    const std::string canonical = device_name::parse(name).str();
    for (int i = 0; i < size(); ++i)
      if (parsed_[static_cast<std::size_t>(i)].str() == canonical) return i;
    return -1;
  }
  /// A short name: TYPE:N when every device is in one task, else the full name.
  std::string short_name(int i) const {
    const device_name& p = parsed(i);
    for (const auto& q : parsed_)
      if (q.job != p.job || q.replica != p.replica || q.task != p.task) return p.str();
    return *p.type + ":" + std::to_string(*p.id);
  }

  /// Gives the link from device `from` to device `to` (distinct) its own latency and bandwidth.
  void set_link(int from, int to, link_spec link) {
    if (from < 0 || from >= size() || to < 0 || to >= size() || from == to)
      fail(error_code::invalid_argument, "cluster::set_link: no link from device ", from, " to ", to, " among ", size());
    check(link, "link " + short_name(from) + " -> " + short_name(to));
    if (links_.empty()) links_.assign(devices_.size() * devices_.size(), default_link_);
    links_[static_cast<std::size_t>(from) * devices_.size() + static_cast<std::size_t>(to)] = link;
  }
  /// The link from device `from` to device `to`.
  const link_spec& link(int from, int to) const {
    if (links_.empty()) return default_link_;
    return links_.at(static_cast<std::size_t>(from) * devices_.size() + static_cast<std::size_t>(to));
  }
  /// The time `bytes` bytes take from device `from` to device `to` (0 to itself).
  double transfer_seconds(double bytes, int from, int to) const {
    if (from == to) return 0;
    const link_spec& l = link(from, to);
    return l.latency_seconds + bytes / l.bytes_per_second;
  }

 private:
  static void check(const link_spec& l, const std::string& what) {
    if (!(l.latency_seconds >= 0) || !(l.bytes_per_second > 0))
      fail(error_code::invalid_argument, "cluster: ", what, " needs a non-negative latency and a positive bandwidth");
  }

  std::vector<device_spec> devices_;
  std::vector<device_name> parsed_;
  link_spec default_link_;
  std::vector<link_spec> links_;  ///< from x devices + to, once set_link was called
};

/// How a cost_model fills in what the graph does not say.
struct cost_model_options {
  /// What a dim the shapes leave unknown (a batch size not yet fed) counts as.
  std::int64_t unknown_dim = 32;
};

/// The estimated cost of each node of a graph (arithmetic, bytes moved, overhead) on each
/// device of a cluster, from the nodes' shapes and the ops' cost functions, or measured
/// times where a traced run gave them: what the placer minimizes.
class cost_model {
 public:
  /// The costs of g's nodes. known: shapes of outputs known beyond the graph's (the values a
  /// run feeds); the shapes of the nodes after them are inferred again from these.
  explicit cost_model(const graph& g, const std::vector<std::pair<output, shape>>& known = {},
                      cost_model_options options = {})
      : graph_(&g), options_(options) {
    if (options_.unknown_dim < 0)
      fail(error_code::invalid_argument, "cost_model_options::unknown_dim must be non-negative, got ", options_.unknown_dim);
    refine(known);
  }

  /// The graph it models.
  const graph& source() const noexcept { return *graph_; }

  /// The shape output o has in this model (the graph's, refined), and its dims with unknown
  /// ones replaced by unknown_dim.
  const partial_shape& output_shape(output o) const { return shapes_.at(index(o.node)).at(static_cast<std::size_t>(o.port)); }
  /// Output o's dims, unknown ones counted as cost_model_options::unknown_dim.
  std::vector<double> output_dims(output o) const { return dims_of(output_shape(o)); }
  /// Output o's bytes, from output_dims and its dtype.
  double output_bytes(output o) const {
    const node& n = graph_->at(o.node);
    const partial_shape& s = output_shape(o);
    if (!s.rank_known()) return static_cast<double>(size_of(n.output_dtype(o.port))) * static_cast<double>(options_.unknown_dim);
    return op_cost_args::elements(dims_of(s)) * static_cast<double>(size_of(n.output_dtype(o.port)));
  }

  /// Whether the node costs only a device's per-node overhead: the executor runs it without
  /// a kernel (control flow), or it hands on a value it holds (constants, variables), or its
  /// op is marked cheap (shape ops, Identity).
  bool overhead_only(int id) const {
    const op_def& d = graph_->at(id).def();
    return d.control != flow::plain || d.constant || d.variable || d.feed || d.cheap;
  }
  /// The arithmetic operations of one run of node `id` (its op's flops function, else the
  /// largest input's or output's element count; 0 for overhead-only nodes).
  double flops(int id) const {
    const node& n = graph_->at(id);
    if (overhead_only(id)) return 0;
    std::vector<std::vector<double>> in, out;
    for (const output& i : n.inputs()) in.push_back(output_dims(i));
    for (int p = 0; p < n.num_outputs(); ++p) out.push_back(output_dims({id, p}));
    if (n.def().flops_fn) {
      const double f = n.def().flops_fn(op_cost_args{n.attrs(), in, out});
      return std::isfinite(f) && f > 0 ? f : 0;
    }
    double most = 0;
    for (const auto* side : {&in, &out})
      for (const auto& dims : *side) most = std::max(most, op_cost_args::elements(dims));
    return most;
  }
  /// The bytes node `id` reads and writes in one run (0 for overhead-only nodes).
  double bytes(int id) const {
    const node& n = graph_->at(id);
    if (overhead_only(id)) return 0;
    double total = 0;
    for (const output& i : n.inputs()) total += output_bytes(i);
    for (int p = 0; p < n.num_outputs(); ++p) total += output_bytes({id, p});
    return total;
  }

  /// The time node `id` takes on device d (a device of c): measured, or estimated.
  double compute_seconds(int id, const cluster& c, int d) const {
    const node& n = graph_->at(id);
    if (auto it = measured_.find(measured_key(n.name(), c.type(d))); it != measured_.end()) return it->second;
    const device_spec& s = c.device(d);
    return s.node_overhead_seconds + std::max(flops(id) / s.flops_per_second, bytes(id) / s.memory_bytes_per_second);
  }
  /// Overrides the estimate of node `name` on every device of `device_type` ("CPU") with a
  /// measured time (the session records traced steps' node times here).
  void set_measured(const std::string& name, const std::string& device_type, double seconds) {
    if (!graph_->find(name)) fail(error_code::not_found, "cost_model::set_measured: no node named '", name, "'");
    if (!(seconds >= 0) || !std::isfinite(seconds))
      fail(error_code::invalid_argument, "cost_model::set_measured: node '", name, "': ", seconds, " s is not a time");
    measured_[measured_key(name, device_type)] = seconds;
  }
  /// Measured times by measured_key(node, device type).
  using measured_times = std::map<std::string, double>;
  /// Sets every measured time of `times`.
  void set_measured(const measured_times& times) {
    for (const auto& [key, seconds] : times) {
      const auto cut = key.find('\n');
      set_measured(key.substr(cut + 1), key.substr(0, cut), seconds);
    }
  }
  /// The key of node `name`'s time on devices of `device_type` in measured_times.
  static std::string measured_key(const std::string& name, const std::string& device_type) {
    return device_type + '\n' + name;
  }

 private:
  std::size_t index(int id) const {
    if (id < 0 || id >= graph_->size()) fail(error_code::not_found, "cost_model: no node with id ", id);
    return static_cast<std::size_t>(id);
  }
  std::vector<double> dims_of(const partial_shape& s) const {
    std::vector<double> out;
    if (!s.rank_known()) return out;
    for (auto d : s.dims()) out.push_back(static_cast<double>(d >= 0 ? d : options_.unknown_dim));
    return out;
  }

  /// The graph's shapes, with the known ones put in and every later node's shape rule run
  /// again on the refined shapes of its inputs (a rule that now fails keeps the graph's).
  void refine(const std::vector<std::pair<output, shape>>& known) {
    const graph& g = *graph_;
    shapes_.resize(static_cast<std::size_t>(g.size()));
    std::vector<char> changed(static_cast<std::size_t>(g.size()), 0);
    for (const auto& [o, s] : known) {
      const node& n = g.at(o.node);
      n.out(o.port);
      if (!n.output_shape(o.port).accepts(s))
        fail(error_code::invalid_argument, "cost_model: ", g.name_of(o), " has shape ", n.output_shape(o.port),
             ", which does not accept ", s);
    }
    for (int id = 0; id < g.size(); ++id) {
      const node& n = g.at(id);
      auto& out = shapes_[static_cast<std::size_t>(id)];
      for (int p = 0; p < n.num_outputs(); ++p) out.push_back(n.output_shape(p));
      bool inputs_changed = false;
      for (const output& i : n.inputs()) inputs_changed |= i.node < id && changed[static_cast<std::size_t>(i.node)];
      if (inputs_changed && n.def().shape_fn) {
        std::vector<dtype> in_types;
        std::vector<partial_shape> in_shapes;
        std::vector<const tensor*> in_values;
        for (const output& i : n.inputs()) {
          const node& p = g.at(i);
          in_types.push_back(p.output_dtype(i.port));
          in_shapes.push_back(i.node < id ? shapes_[static_cast<std::size_t>(i.node)][static_cast<std::size_t>(i.port)]
                                          : p.output_shape(i.port));
          in_values.push_back(p.def().constant ? p.attrs().find("value")->get_if<tensor>() : nullptr);
        }
        std::vector<dtype> out_types;
        for (int p = 0; p < n.num_outputs(); ++p) out_types.push_back(n.output_dtype(p));
        const std::string who = n.describe();  // the context keeps a reference to it
        shape_context ctx(who, n.attrs(), std::move(in_types), std::move(in_shapes), std::move(in_values),
                          std::move(out_types));
        try {
          n.def().shape_fn(ctx);
          for (int p = 0; p < n.num_outputs(); ++p)
            if (ctx.output_shapes()[static_cast<std::size_t>(p)] != out[static_cast<std::size_t>(p)]) {
              out[static_cast<std::size_t>(p)] = ctx.output_shapes()[static_cast<std::size_t>(p)];
              changed[static_cast<std::size_t>(id)] = 1;
            }
        } catch (const error&) {
          // The values fed disagree with a rule; the step will say so. The graph's shapes stand.
        }
      }
      for (const auto& [o, s] : known)
        if (o.node == id) {
          out[static_cast<std::size_t>(o.port)] = s;
          changed[static_cast<std::size_t>(id)] = 1;
        }
    }
  }

  const graph* graph_;
  cost_model_options options_;
  std::vector<std::vector<partial_shape>> shapes_;
  measured_times measured_;
};

}  // namespace weft::passes

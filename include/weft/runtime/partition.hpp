// Partitioning (whitepaper §3.3): an executable whose nodes the placer spread over several
// devices becomes one executable per device. Every edge between two devices becomes a Send
// in the producer's partition and a Recv in the consumer's; all the consumers of one tensor
// on one device share one Recv, and a control edge crosses as a Send and Recv of a token. A
// fed value goes to each partition that reads it as a feed node of its own. The partitions'
// steps meet in one rendezvous (runtime/rendezvous.hpp, step::run_partitions); each fetch is
// served by the partition of the node that computes it.
//
// Loops do not cross devices yet: the placer keeps every node of a loop frame (with its
// Enters and Exits) on one device, so each Send and Recv runs once per step, in the root
// frame.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/runtime/executable.hpp>

namespace weft {

// The partitions of `whole` (its nodes, edges and fetches set, not finished yet), one per
// device its nodes use, each finished; none when they use one device. device_names: the
// devices' names by index, for the rendezvous keys and the traces.
// lossy(o): whether graph output o, when it is float32, crosses devices as bfloat16.
inline std::vector<std::shared_ptr<const executable>> partition(const executable& whole,
                                                                const std::vector<std::string>& device_names,
                                                                const std::function<bool(output)>& lossy = {}) {
  const auto& old = whole.nodes;
  const auto count = static_cast<int>(old.size());
  auto is_feed = [&](int i) { return !old[static_cast<std::size_t>(i)].def; };
  // The partitions, in the order of the devices' indices.
  std::map<int, int> part_of_device;
  for (int i = 0; i < count; ++i)
    if (!is_feed(i)) part_of_device.emplace(old[static_cast<std::size_t>(i)].device, 0);
  if (part_of_device.size() <= 1) return {};
  std::vector<int> device_of_part;
  for (auto& [device, part] : part_of_device) {
    part = static_cast<int>(device_of_part.size());
    device_of_part.push_back(device);
  }
  const auto parts = device_of_part.size();
  auto part = [&](int i) { return part_of_device.at(old[static_cast<std::size_t>(i)].device); };

  std::vector<std::shared_ptr<executable>> out;
  std::vector<int> slots(parts, 0);
  for (std::size_t p = 0; p < parts; ++p) {
    auto x = std::make_shared<executable>();
    x->source = whole.source;
    x->feeds = whole.feeds;
    x->placement = whole.placement;
    x->num_fetches = whole.num_fetches;
    x->device = device_of_part[p];
    out.push_back(std::move(x));
  }
  auto add = [&](int p, exec_node xn) {
    auto& nodes = out[static_cast<std::size_t>(p)]->nodes;
    xn.input_start = slots[static_cast<std::size_t>(p)];
    slots[static_cast<std::size_t>(p)] += xn.num_inputs;
    nodes.push_back(std::move(xn));
    return static_cast<int>(nodes.size() - 1);
  };

  // Feed nodes, in each partition that reads them (a fed value fetched as it is: the first).
  std::map<std::pair<int, int>, int> feed_copy;  // (old feed node, partition) -> node there
  for (int i = 0; i < count; ++i) {
    if (!is_feed(i)) continue;
    const exec_node& f = old[static_cast<std::size_t>(i)];
    std::vector<int> readers;
    for (const auto& e : f.out_edges) readers.push_back(part(e.dst));
    if (!f.fetches.empty()) readers.push_back(0);
    for (int p : readers)
      if (!feed_copy.count({i, p})) {
        exec_node copy;
        copy.feed = f.feed;
        copy.num_outputs = 1;
        copy.cheap = true;
        copy.device = device_of_part[static_cast<std::size_t>(p)];
        copy.fetches = p == 0 ? f.fetches : std::vector<std::pair<int, int>>{};
        feed_copy[{i, p}] = add(p, std::move(copy));
      }
  }

  // Recvs: one per (tensor or control token, consuming partition).
  using edge_key = std::tuple<int, int, int>;  // (old producer, port or -1 for control, consumer's partition)
  std::map<edge_key, int> recv_of;
  auto key_text = [&](const edge_key& k) {
    const auto [src, port, p] = k;
    const exec_node& s = old[static_cast<std::size_t>(src)];
    return (port < 0 ? "^" + s.def->name() : s.def->name() + ":" + std::to_string(port)) + " " +
           device_names.at(static_cast<std::size_t>(s.device)) + " -> " +
           device_names.at(static_cast<std::size_t>(device_of_part[static_cast<std::size_t>(p)]));
  };
  auto add_transfer = [&](int p, const edge_key& k, bool send) {
    auto& x = *out[static_cast<std::size_t>(p)];
    const auto [src, port, to] = k;
    const node& n = *old[static_cast<std::size_t>(src)].def;
    const bool cut = port >= 0 && lossy && n.output_dtype(port) == dtype::float32 && lossy(output{n.id(), port});
    x.transfers.push_back({key_text(k), send, port < 0, cut});
    exec_node xn;
    xn.transfer = static_cast<int>(x.transfers.size() - 1);
    xn.cheap = true;
    xn.device = device_of_part[static_cast<std::size_t>(p)];
    xn.num_inputs = send && std::get<1>(k) >= 0 ? 1 : 0;
    xn.num_outputs = send ? 0 : 1;
    xn.pending = send ? 1 : 0;
    if (xn.num_inputs) xn.input_is_ref.push_back(false);
    return add(p, std::move(xn));
  };
  for (int i = 0; i < count; ++i) {
    if (is_feed(i)) continue;
    const exec_node& u = old[static_cast<std::size_t>(i)];
    for (const auto& e : u.out_edges)
      if (part(e.dst) != part(i) && !recv_of.count({i, e.src_port, part(e.dst)}))
        recv_of[{i, e.src_port, part(e.dst)}] = add_transfer(part(e.dst), {i, e.src_port, part(e.dst)}, false);
    for (int c : u.control_out)
      if (part(c) != part(i) && !recv_of.count({i, -1, part(c)}))
        recv_of[{i, -1, part(c)}] = add_transfer(part(c), {i, -1, part(c)}, false);
  }

  // The nodes themselves, in their order.
  std::vector<int> now(static_cast<std::size_t>(count), -1);  // old node -> its index in its partition
  std::vector<int> old_start(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (is_feed(i)) continue;
    exec_node xn = old[static_cast<std::size_t>(i)];
    old_start[static_cast<std::size_t>(i)] = xn.input_start;
    xn.out_edges.clear();
    xn.control_out.clear();
    now[static_cast<std::size_t>(i)] = add(part(i), std::move(xn));
  }
  auto node_in = [&](int p, int id) -> exec_node& { return out[static_cast<std::size_t>(p)]->nodes[static_cast<std::size_t>(id)]; };

  // Sends, after the nodes they send from.
  for (const auto& [k, recv] : recv_of) {
    const auto [src, port, to] = k;
    const int p = part(src);
    const int send = add_transfer(p, k, true);
    exec_node& from = node_in(p, now[static_cast<std::size_t>(src)]);
    if (port >= 0) from.out_edges.push_back({port, send, node_in(p, send).input_start});
    else from.control_out.push_back(send);
  }

  // Edges: within a partition as they were, across through the Recv.
  for (int i = 0; i < count; ++i) {
    const exec_node& u = old[static_cast<std::size_t>(i)];
    for (const auto& e : u.out_edges) {
      const int p = part(e.dst), v = now[static_cast<std::size_t>(e.dst)];
      const int slot = node_in(p, v).input_start + (e.dst_slot - old_start[static_cast<std::size_t>(e.dst)]);
      const int from = is_feed(i)             ? feed_copy.at({i, p})
                       : part(i) == p         ? now[static_cast<std::size_t>(i)]
                                              : recv_of.at({i, e.src_port, p});
      const int port = !is_feed(i) && part(i) != p ? 0 : e.src_port;
      node_in(p, from).out_edges.push_back({port, v, slot});
    }
    for (int c : u.control_out) {
      const int p = part(c);
      const int from = part(i) == p ? now[static_cast<std::size_t>(i)] : recv_of.at({i, -1, p});
      node_in(p, from).control_out.push_back(now[static_cast<std::size_t>(c)]);
    }
  }

  std::vector<std::shared_ptr<const executable>> finished;
  for (auto& x : out) {
    finish_executable(*x);
    finished.push_back(std::move(x));
  }
  return finished;
}

}  // namespace weft

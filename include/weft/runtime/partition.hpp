/// @file
/// Partitioning (whitepaper §3.3): an executable whose nodes the placer spread over several
/// devices becomes one executable per device. Every edge between two devices becomes a Send
/// in the producer's partition and a Recv in the consumer's; all the consumers of one tensor
/// on one device share one Recv, and a control edge crosses as a Send and Recv of a token. A
/// fed value goes to each partition that reads it as a feed node of its own. The partitions'
/// steps meet in one rendezvous (runtime/rendezvous.hpp, step::run_partitions); each fetch is
/// served by the partition of the node that computes it.
///
/// Recv scheduling (whitepaper §5.2): by default a Recv starts with the step and takes its
/// value as soon as it is sent (as soon as possible). Given the placement's simulated times
/// (recv_schedule), each Recv whose value would wait long for its consumers gets a control
/// edge from the node of its own partition that is simulated to finish last before the
/// value must be fetched, so that it is taken as late as possible: a transfer that copies
/// into the receiving device's memory then holds that memory only shortly before it is used.
///
/// Loops across devices (whitepaper §4.4): see partition(). A loop nested in another goes
/// with the outer loop's control flow (the placer keeps them together).
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include <weft/core/error.hpp>
#include <weft/core/prebuilt.hpp>
#include <weft/runtime/executable.hpp>
#include <weft/runtime/kernel.hpp>

namespace weft {

namespace detail {
/// Puts x's nodes in a topological order (a NextIteration's edges into Merges left out), the
/// lowest index first among those ready, as the frame analysis reads them: a Recv made
/// before the Merge that puts it inside its loop comes after it.
void sort_nodes(executable& x);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void sort_nodes(executable& x) {
  auto& nodes = x.nodes;
  const auto n = nodes.size();
  auto is = [&](std::size_t i, flow kind) { return nodes[i].def && nodes[i].def->def().control == kind; };
  auto back = [&](std::size_t from, int to) { return is(from, flow::next_iteration) && is(static_cast<std::size_t>(to), flow::merge); };
  std::vector<int> waiting(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (const auto& e : nodes[i].out_edges)
      if (!back(i, e.dst)) ++waiting[static_cast<std::size_t>(e.dst)];
    for (int c : nodes[i].control_out) ++waiting[static_cast<std::size_t>(c)];
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  auto release = [&](int d) {
    if (--waiting[static_cast<std::size_t>(d)] == 0) ready.push(d);
  };
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (const auto& e : nodes[static_cast<std::size_t>(i)].out_edges)
      if (!back(static_cast<std::size_t>(i), e.dst)) release(e.dst);
    for (int c : nodes[static_cast<std::size_t>(i)].control_out) release(c);
  }
  if (order.size() != n) fail(error_code::internal, "partition: a partition's nodes form a cycle");
  std::vector<int> index(n);
  for (std::size_t k = 0; k < n; ++k) index[static_cast<std::size_t>(order[k])] = static_cast<int>(k);
  std::vector<exec_node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(nodes[static_cast<std::size_t>(i)]));
  for (auto& xn : sorted) {
    for (auto& e : xn.out_edges) e.dst = index[static_cast<std::size_t>(e.dst)];
    for (int& c : xn.control_out) c = index[static_cast<std::size_t>(c)];
  }
  nodes = std::move(sorted);
}
#endif
}  // namespace detail

/// What as-late-as-possible Recv scheduling needs, by node of the whole executable: its
/// simulated start and finish (seconds from the step's start), and how long a tensor takes
/// from one device to another.
struct recv_schedule {
  std::vector<double> start;   ///< each node's simulated start
  std::vector<double> finish;  ///< each node's simulated finish
  /// The time output (src, port) takes to reach device to_device.
  std::function<double(int src, int port, int to_device)> transfer_seconds;
  double min_gain = 20e-6;  ///< a Recv is delayed only when it would take its value this much earlier
};

/// The partitions of `whole` (its nodes, edges and fetches set, not finished yet), one per
/// device its nodes use, each finished; none when they use one device. device_names: the
/// devices' names by index, for the rendezvous keys and the traces.
/// lossy(o): whether graph output o, when it is float32, crosses devices as bfloat16.
/// alap: the simulated times for as-late-as-possible Recvs; none: as soon as possible.
std::vector<std::shared_ptr<const executable>> partition(const executable& whole,
                                                         const std::vector<std::string>& device_names,
                                                         const std::function<bool(output)>& lossy = {},
                                                         const recv_schedule* alap = nullptr);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE std::vector<std::shared_ptr<const executable>> partition(const executable& whole,
                                                                                    const std::vector<std::string>& device_names,
                                                                                    const std::function<bool(output)>& lossy,
                                                                                    const recv_schedule* alap) {
  const auto& old = whole.nodes;
  const auto count = static_cast<int>(old.size());
  auto is_feed = [&](int i) { return !old[static_cast<std::size_t>(i)].def; };
  // The partitions, in the order of the devices' indices.
  std::vector<int> part_of_device;
  for (int i = 0; i < count; ++i)
    if (!is_feed(i)) {
      const auto d = static_cast<std::size_t>(old[static_cast<std::size_t>(i)].device);
      if (d >= part_of_device.size()) part_of_device.resize(d + 1, -1);
      part_of_device[d] = 0;
    }
  std::vector<int> device_of_part;
  for (std::size_t d = 0; d < part_of_device.size(); ++d)
    if (part_of_device[d] >= 0) {
      part_of_device[d] = static_cast<int>(device_of_part.size());
      device_of_part.push_back(static_cast<int>(d));
    }
  if (device_of_part.size() <= 1) return {};
  const auto parts = device_of_part.size();
  auto part = [&](int i) { return part_of_device[static_cast<std::size_t>(old[static_cast<std::size_t>(i)].device)]; };

  // Loops across devices (whitepaper §4.4): a loop in the root frame whose body spans
  // partitions runs its iterations in each: in its home partition (the one with its control
  // flow, which the placer keeps together with the loops inside it) as it is, in every other
  // through a control loop of its own (an Enter of a constant, a Merge, a Switch on the
  // loop's predicate, received each iteration, and a NextIteration). Each Recv inside the
  // loop runs once per iteration: a control edge from a Merge of its partition's loop puts
  // it there, and the rendezvous keys it by iteration.
  const passes::frame_map frames = passes::find_frames(frame_view(whole), false);
  struct spanning_loop {
    int frame = 0, home = -1, merge = -1, loop_cond = -1;
    std::vector<char> in;  // by partition: some of its body runs there
  };
  std::vector<spanning_loop> loops;
  std::vector<int> loop_of_frame(frames.frames().size(), -1);
  for (int i = 0; i < count; ++i) {
    if (is_feed(i)) continue;
    const int f = frames.of(i);
    if (f == 0 || frames.info(f).depth != 1) continue;
    int& l = loop_of_frame[static_cast<std::size_t>(f)];
    if (l < 0) {
      l = static_cast<int>(loops.size());
      loops.push_back({f, -1, -1, -1, std::vector<char>(parts, 0)});
    }
    spanning_loop& L = loops[static_cast<std::size_t>(l)];
    L.in[static_cast<std::size_t>(part(i))] = 1;
    const flow kind = old[static_cast<std::size_t>(i)].def->def().control;
    if (kind == flow::plain) continue;
    if (L.home >= 0 && L.home != part(i))
      fail(error_code::internal, "partition: the control flow of ", frames.frame_name(f), " spans devices (",
           old[static_cast<std::size_t>(i)].def->describe(), ")");
    L.home = part(i);
    if (kind == flow::merge && L.merge < 0) L.merge = i;
    if (kind == flow::loop_cond) L.loop_cond = i;
  }
  auto spans = [&](const spanning_loop& L) { return std::count(L.in.begin(), L.in.end(), 1) > 1; };
  for (const auto& L : loops)
    if (spans(L) && (L.home < 0 || L.merge < 0 || L.loop_cond < 0))
      fail(error_code::internal, "partition: ", frames.frame_name(L.frame), " spans devices but has no Merge or LoopCond");
  // An edge from `src` inside a loop crosses devices only where the loop does.
  auto check_crossing = [&](int src) {
    const int f = frames.out_frame(src);
    if (f == 0) return;
    const int l = loop_of_frame[static_cast<std::size_t>(f)];
    if (l < 0 || !spans(loops[static_cast<std::size_t>(l)]))
      fail(error_code::internal, "partition: an edge from ", old[static_cast<std::size_t>(src)].def->describe(),
           " in ", frames.frame_name(f), " crosses devices, but its loop does not");
  };

  std::vector<std::shared_ptr<executable>> out;
  std::vector<int> slots(parts, 0);
  for (std::size_t p = 0; p < parts; ++p) {
    auto x = std::make_shared<executable>();
    x->source = whole.source;
    x->rewritten = whole.rewritten;
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
  std::vector<std::vector<int>> feed_copy(static_cast<std::size_t>(count));  // old feed node -> its node in each partition
  for (int i = 0; i < count; ++i) {
    if (!is_feed(i)) continue;
    const exec_node& f = old[static_cast<std::size_t>(i)];
    auto& copies = feed_copy[static_cast<std::size_t>(i)];
    copies.assign(parts, -1);
    std::vector<int> readers;
    for (const auto& e : f.out_edges) readers.push_back(part(e.dst));
    if (!f.fetches.empty()) readers.push_back(0);
    for (int p : readers)
      if (copies[static_cast<std::size_t>(p)] < 0) {
        exec_node copy;
        copy.feed = f.feed;
        copy.num_outputs = 1;
        copy.cheap = true;
        copy.device = device_of_part[static_cast<std::size_t>(p)];
        copy.fetches = p == 0 ? f.fetches : std::vector<std::pair<int, int>>{};
        copies[static_cast<std::size_t>(p)] = add(p, std::move(copy));
      }
  }

  // Recvs: one per (tensor or control token, consuming partition): recv_of[producer] by
  // (port + 1) x partitions + partition (port -1: the control token), -1 where none.
  std::vector<std::vector<int>> recv_of(static_cast<std::size_t>(count));
  auto recv = [&](int src, int port, int p) -> int& {
    auto& r = recv_of[static_cast<std::size_t>(src)];
    if (r.empty()) r.assign(static_cast<std::size_t>(old[static_cast<std::size_t>(src)].num_outputs + 1) * parts, -1);
    return r[static_cast<std::size_t>(port + 1) * parts + static_cast<std::size_t>(p)];
  };
  auto key_text = [&](int src, int port, int p) {
    const exec_node& s = old[static_cast<std::size_t>(src)];
    return (port < 0 ? "^" + s.def->name() : s.def->name() + ":" + std::to_string(port)) + " " +
           device_names.at(static_cast<std::size_t>(s.device)) + " -> " +
           device_names.at(static_cast<std::size_t>(device_of_part[static_cast<std::size_t>(p)]));
  };
  // A Send (in partition p, the producer's) or a Recv (in p, the consumer's) of the edge
  // (src, port) -> partition `to`.
  // The edges are numbered as their Recvs are made; a Send takes its Recv's number.
  int edges = 0;
  auto add_transfer = [&](int p, int src, int port, int to, bool send, int edge) {
    auto& x = *out[static_cast<std::size_t>(p)];
    const node& n = *old[static_cast<std::size_t>(src)].def;
    const bool cut = port >= 0 && lossy && n.output_dtype(port) == dtype::float32 && lossy(output{n.id(), port});
    x.transfers.push_back({key_text(src, port, to), edge, send, port < 0, cut});
    exec_node xn;
    xn.transfer = static_cast<int>(x.transfers.size() - 1);
    xn.cheap = true;
    xn.device = device_of_part[static_cast<std::size_t>(p)];
    xn.num_inputs = send && port >= 0 ? 1 : 0;
    xn.num_outputs = send ? 0 : 1;
    xn.pending = send ? 1 : 0;
    if (xn.num_inputs) xn.input_is_ref.push_back(false);
    return add(p, std::move(xn));
  };
  for (int i = 0; i < count; ++i) {
    if (is_feed(i)) continue;
    const exec_node& u = old[static_cast<std::size_t>(i)];
    for (const auto& e : u.out_edges)
      if (const int to = part(e.dst); to != part(i) && recv(i, e.src_port, to) < 0) {
        check_crossing(i);
        recv(i, e.src_port, to) = add_transfer(to, i, e.src_port, to, false, edges++);
      }
    for (int c : u.control_out)
      if (const int to = part(c); to != part(i) && recv(i, -1, to) < 0) {
        check_crossing(i);
        recv(i, -1, to) = add_transfer(to, i, -1, to, false, edges++);
      }
  }
  // Each loop's predicate, to every other partition its body runs in.
  for (const auto& L : loops)
    if (spans(L))
      for (int q = 0; q < static_cast<int>(parts); ++q)
        if (q != L.home && L.in[static_cast<std::size_t>(q)] && recv(L.loop_cond, 0, q) < 0)
          recv(L.loop_cond, 0, q) = add_transfer(q, L.loop_cond, 0, q, false, edges++);

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
  for (int src = 0; src < count; ++src)
    for (std::size_t k = 0; k < recv_of[static_cast<std::size_t>(src)].size(); ++k) {
      if (recv_of[static_cast<std::size_t>(src)][k] < 0) continue;
      const int port = static_cast<int>(k / parts) - 1, to = static_cast<int>(k % parts), p = part(src);
      const exec_node& r = node_in(to, recv_of[static_cast<std::size_t>(src)][k]);
      const int send = add_transfer(p, src, port, to, true, out[static_cast<std::size_t>(to)]->transfers[static_cast<std::size_t>(r.transfer)].edge);
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
      const int from = is_feed(i)             ? feed_copy[static_cast<std::size_t>(i)][static_cast<std::size_t>(p)]
                       : part(i) == p         ? now[static_cast<std::size_t>(i)]
                                              : recv(i, e.src_port, p);
      const int port = !is_feed(i) && part(i) != p ? 0 : e.src_port;
      node_in(p, from).out_edges.push_back({port, v, slot});
    }
    for (int c : u.control_out) {
      const int p = part(c);
      const int from = part(i) == p ? now[static_cast<std::size_t>(i)] : recv(i, -1, p);
      node_in(p, from).control_out.push_back(now[static_cast<std::size_t>(c)]);
    }
  }

  // The control loops (nodes of each partition's own graph), and the control edge into each
  // Recv inside a loop.
  std::vector<std::shared_ptr<graph>> own(parts);
  for (const auto& L : loops) {
    if (!spans(L)) continue;
    const passes::frame& info = frames.info(L.frame);
    std::vector<int> trigger(parts, -1);  // the Merge each partition's Recvs in the loop wait for
    trigger[static_cast<std::size_t>(L.home)] = now[static_cast<std::size_t>(L.merge)];
    for (int q = 0; q < static_cast<int>(parts); ++q) {
      if (q == L.home || !L.in[static_cast<std::size_t>(q)]) continue;
      auto& g_of_q = own[static_cast<std::size_t>(q)];
      if (!g_of_q) out[static_cast<std::size_t>(q)]->own_nodes = g_of_q = std::make_shared<graph>();
      graph& g = *g_of_q;
      const std::string prefix = "_control_loop/" + info.name + "/";
      const node& token = g.constant(tensor::scalar(true), prefix + "token");
      const node& enter = g.op("Enter", {token}, {{"frame_name", info.name}, {"is_constant", false}, {"parallel_iterations", info.parallel_iterations}},
                               prefix + "enter");
      const node& merge = g.op("Merge", {enter, enter}, {}, prefix + "merge");
      const node& pred_stand_in = g.placeholder(dtype::boolean, partial_shape{}, prefix + "pred");  // the Switch's definition only
      const node& sw = g.op("Switch", {merge, pred_stand_in}, {}, prefix + "switch");
      const node& next = g.op("NextIteration", {sw.out(1)}, {}, prefix + "next_iteration");
      g.close_loop(merge.id(), next.out(0));
      const std::string& where = device_names.at(static_cast<std::size_t>(device_of_part[static_cast<std::size_t>(q)]));
      auto control_node = [&](const node& n, int inputs, int outputs, int pending) {
        exec_node xn;
        xn.def = &n;
        xn.num_inputs = inputs;
        xn.num_outputs = outputs;
        xn.pending = pending;
        xn.cheap = true;
        xn.device = device_of_part[static_cast<std::size_t>(q)];
        xn.input_is_ref.assign(static_cast<std::size_t>(inputs), false);
        return add(q, std::move(xn));
      };
      const int t = control_node(token, 0, 1, 0);
      node_in(q, t).kernel = kernel_registry::global().create(token, where.substr(0, where.find(':')));
      const int e = control_node(enter, 1, 1, 1), m = control_node(merge, 2, 2, 0), w = control_node(sw, 2, 2, 2),
                n = control_node(next, 1, 1, 1);
      auto edge = [&](int from, int port, int to, int input) {
        node_in(q, from).out_edges.push_back({port, to, node_in(q, to).input_start + input});
      };
      edge(t, 0, e, 0);
      edge(e, 0, m, 0);
      edge(m, 0, w, 0);
      edge(recv(L.loop_cond, 0, q), 0, w, 1);
      edge(w, 1, n, 0);
      edge(n, 0, m, 1);
      trigger[static_cast<std::size_t>(q)] = m;
    }
    for (int src = 0; src < count; ++src) {
      if (is_feed(src) || frames.out_frame(src) != L.frame) continue;
      for (std::size_t k = 0; k < recv_of[static_cast<std::size_t>(src)].size(); ++k)
        if (const int r = recv_of[static_cast<std::size_t>(src)][k]; r >= 0) {
          const auto p = k % parts;
          node_in(static_cast<int>(p), trigger[p]).control_out.push_back(r);
          ++node_in(static_cast<int>(p), r).pending;
        }
    }
  }

  if (alap) {
    // Each Recv's trigger: the node of its partition that finishes last before the
    // value must leave (its consumers' first start less the transfer), and later than the
    // value could come. None of the consumers' descendants (stamped) may trigger it.
    std::vector<int> stamp(static_cast<std::size_t>(count), -1);
    std::vector<int> stack;
    int round = 0;
    auto t = [&](const std::vector<double>& v, int i) { return v[static_cast<std::size_t>(i)]; };
    for (int src = 0; src < count; ++src)
      for (std::size_t k = 0; k < recv_of[static_cast<std::size_t>(src)].size(); ++k) {
        const int r = recv_of[static_cast<std::size_t>(src)][k];
        if (r < 0) continue;
        const int port = static_cast<int>(k / parts) - 1, p = static_cast<int>(k % parts);
        const exec_node& u = old[static_cast<std::size_t>(src)];
        if (frames.out_frame(src) != 0) continue;  // inside a loop: it runs each iteration
        ++round;
        double needed = std::numeric_limits<double>::infinity();
        auto reach = [&](int c) {
          if (part(c) == p) needed = std::min(needed, t(alap->start, c));
          if (stamp[static_cast<std::size_t>(c)] != round) stamp[static_cast<std::size_t>(c)] = round, stack.push_back(c);
        };
        if (port < 0) {
          for (int c : u.control_out) reach(c);
        } else {
          for (const auto& e : u.out_edges)
            if (e.src_port == port) reach(e.dst);
        }
        while (!stack.empty()) {
          const exec_node& v = old[static_cast<std::size_t>(stack.back())];
          stack.pop_back();
          for (const auto& e : v.out_edges)
            if (stamp[static_cast<std::size_t>(e.dst)] != round) stamp[static_cast<std::size_t>(e.dst)] = round, stack.push_back(e.dst);
          for (int c : v.control_out)
            if (stamp[static_cast<std::size_t>(c)] != round) stamp[static_cast<std::size_t>(c)] = round, stack.push_back(c);
        }
        const double travel = port < 0 ? 0.0 : alap->transfer_seconds(src, port, device_of_part[static_cast<std::size_t>(p)]);
        const double earliest = t(alap->finish, src) + travel, latest = needed - travel;
        if (latest - earliest < alap->min_gain) continue;
        int trigger = -1;
        for (int i = 0; i < count; ++i)
          if (!is_feed(i) && part(i) == p && frames.of(i) == 0 && stamp[static_cast<std::size_t>(i)] != round &&
              t(alap->finish, i) < latest && t(alap->finish, i) > earliest &&
              (trigger < 0 || t(alap->finish, i) > t(alap->finish, trigger)))
            trigger = i;
        if (trigger < 0) continue;
        node_in(p, now[static_cast<std::size_t>(trigger)]).control_out.push_back(r);
        ++node_in(p, r).pending;
      }
  }

  std::vector<std::shared_ptr<const executable>> finished;
  for (auto& x : out) {
    x->num_edges = edges;
    detail::sort_nodes(*x);
    finish_executable(*x);
    finished.push_back(std::move(x));
  }
  return finished;
}
#endif

}  // namespace weft

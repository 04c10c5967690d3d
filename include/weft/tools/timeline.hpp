/// @file
/// Timeline: a traced step as Chrome Trace Event JSON, which Perfetto and chrome://tracing
/// open: one process per device, one thread row per executor thread, one complete "X" event
/// per node (its args: the node's name, op and each output's dtype, shape and bytes), a
/// counter "memory" per device (its allocator's bytes in use as each node ended), a flow
/// arrow from each Send to its Recv between devices and from the thread that started an
/// async kernel (a queue's dequeue, say) to the one that finished it.
/// `step_stats_summary(stats)`: the step as text, its time by op type and its slowest nodes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <string>

#include <weft/core/prebuilt.hpp>
#include <weft/runtime/executor.hpp>

namespace weft {

namespace detail {
inline void json_string(std::ostream& out, const std::string& s) {
  out << '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\t': out << "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out << buf;
        } else {
          out << ch;
        }
    }
  }
  out << '"';
}
/// Nanoseconds as exact microseconds with three decimals ("1234567.891"): a double through
/// the stream's default six significant digits loses everything below a second.
inline void json_micros(std::ostream& out, std::int64_t ns) {
  if (ns < 0) out << '-';
  const std::uint64_t v = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char frac[4];
  std::snprintf(frac, sizeof frac, "%03u", static_cast<unsigned>(v % 1000));
  out << v / 1000 << '.' << frac;
}
}  // namespace detail

/// Writes a traced step (run_metadata::stats) to `out` as Chrome Trace Event JSON.
void write_chrome_trace(std::ostream& out, const step_stats& stats);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE void write_chrome_trace(std::ostream& out, const step_stats& stats) {
  std::map<std::string, int> pids;
  for (const auto& n : stats.nodes) pids.emplace(n.device, static_cast<int>(pids.size()) + 1);
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto sep = [&] {
    if (!first) out << ',';
    first = false;
    out << '\n';
  };
  for (const auto& [device, pid] : pids) {
    sep();
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"args\":{\"name\":";
    detail::json_string(out, device);
    out << "}}";
  }
  for (const auto& n : stats.nodes) {
    sep();
    out << "{\"name\":";
    detail::json_string(out, n.op);
    out << ",\"cat\":\"Op\",\"ph\":\"X\",\"pid\":" << pids[n.device] << ",\"tid\":" << n.thread
        << ",\"ts\":";
    detail::json_micros(out, n.start_ns);
    out << ",\"dur\":";
    detail::json_micros(out, n.end_ns - n.start_ns);
    out << ",\"args\":{\"name\":";
    detail::json_string(out, n.node);
    out << ",\"op\":";
    detail::json_string(out, n.op);
    if (!n.outputs.empty()) {
      out << ",\"outputs\":[";
      for (std::size_t i = 0; i < n.outputs.size(); ++i) {
        const auto& o = n.outputs[i];
        out << (i ? "," : "");
        if (o.dtype == dtype::invalid) {
          out << "null";
          continue;
        }
        std::ostringstream shape_text;
        shape_text << o.shape;
        out << "{\"dtype\":\"" << name(o.dtype) << "\",\"shape\":";
        detail::json_string(out, shape_text.str());
        out << ",\"bytes\":" << o.bytes << "}";
      }
      out << "]";
    }
    out << "}}";
    // The device's memory when the node ended.
    sep();
    out << "{\"name\":\"memory\",\"ph\":\"C\",\"pid\":" << pids[n.device] << ",\"ts\":";
    detail::json_micros(out, n.end_ns);
    out << ",\"args\":{\"bytes_in_use\":" << n.bytes_in_use << "}}";
  }
  // A flow arrow from each Send to the Recv of the same edge (its end: when the value came).
  std::map<std::string, const node_stats*> sends;
  for (const auto& n : stats.nodes)
    if (n.op == "_Send") sends[n.node] = &n;
  int flow = 0;
  for (const auto& n : stats.nodes) {
    if (n.op != "_Recv") continue;
    auto it = sends.find(n.node);
    if (it == sends.end()) continue;
    const node_stats& s = *it->second;
    ++flow;
    for (const auto* end : {&s, &n}) {
      sep();
      out << "{\"name\":\"transfer\",\"cat\":\"transfer\",\"ph\":\"" << (end == &s ? "s" : "f\",\"bp\":\"e")
          << "\",\"id\":" << flow << ",\"pid\":" << pids[end->device] << ",\"tid\":" << end->thread << ",\"ts\":";
      detail::json_micros(out, end == &s ? s.start_ns : n.end_ns);
      out << ",\"args\":{\"edge\":";
      detail::json_string(out, n.node);
      out << "}}";
    }
  }
  // A flow arrow from the thread that started each async kernel to the one that ended it.
  for (const auto& n : stats.nodes) {
    if (n.start_thread < 0 || n.start_thread == n.thread) continue;
    ++flow;
    for (int end = 0; end < 2; ++end) {
      sep();
      out << "{\"name\":\"async\",\"cat\":\"async\",\"ph\":\"" << (end == 0 ? "s" : "f\",\"bp\":\"e")
          << "\",\"id\":" << flow << ",\"pid\":" << pids[n.device] << ",\"tid\":" << (end == 0 ? n.start_thread : n.thread)
          << ",\"ts\":";
      detail::json_micros(out, end == 0 ? n.start_ns : n.end_ns);
      out << ",\"args\":{\"name\":";
      detail::json_string(out, n.node);
      out << "}}";
    }
  }
  out << "\n]}\n";
}
#endif

/// A traced step (run_metadata::stats) as Chrome Trace Event JSON.
inline std::string chrome_trace(const step_stats& stats) {
  std::ostringstream out;
  write_chrome_trace(out, stats);
  return out.str();
}

/// The nodes of one op type in a traced step.
struct op_type_stats {
  std::string op;             ///< the op type
  std::size_t count = 0;      ///< its nodes that ran
  std::int64_t total_ns = 0;  ///< their time, summed
};
/// A traced step in figures (summarize()): its wall time (first start to last end), the time
/// of its nodes by op type (count, total, share, mean; the costliest first), its slowest
/// nodes with their outputs (pointers into the step_stats summarized), and each device's peak
/// of memory in use as its nodes ended.
struct step_summary {
  std::int64_t wall_ns = 0;  ///< the first node's start to the last one's end
  std::int64_t node_ns = 0;  ///< the nodes' times, summed
  std::size_t nodes = 0;     ///< the nodes that ran
  std::size_t threads = 0;   ///< the threads they ran on
  std::vector<op_type_stats> by_op;        ///< the costliest first
  std::vector<const node_stats*> slowest;  ///< the slowest first, at most `top`
  std::map<std::string, std::size_t> peak_bytes;  ///< device -> bytes

  /// As text, for a terminal.
  std::string to_string() const {
    std::ostringstream out;
    out << std::fixed << std::setprecision(3);
    out << "step: " << wall_ns / 1e6 << " ms wall, " << node_ns / 1e6 << " ms in " << nodes << " nodes on " << threads
        << (threads == 1 ? " thread\n" : " threads\n");
    for (const auto& [device, bytes] : peak_bytes) {
      out << "  memory in use on " << device << ": at most " << std::setprecision(1);
      if (bytes >= 1048576) out << bytes / 1048576.0 << " MiB\n";
      else out << bytes / 1024.0 << " KiB\n";
      out << std::setprecision(3);
    }
    out << "by op type:\n" << std::left << std::setw(24) << "  op" << std::right << std::setw(7) << "count" << std::setw(12)
        << "total ms" << std::setw(8) << "share" << std::setw(11) << "mean us\n";
    for (const auto& t : by_op)
      out << "  " << std::left << std::setw(22) << t.op << std::right << std::setw(7) << t.count << std::setw(12)
          << t.total_ns / 1e6 << std::setw(7) << std::setprecision(1) << (node_ns ? 100.0 * t.total_ns / node_ns : 0.0)
          << "%" << std::setw(10) << t.total_ns / 1e3 / static_cast<double>(t.count) << "\n"
          << std::setprecision(3);
    out << "slowest nodes:\n";
    for (const auto* n : slowest) {
      out << "  " << std::setw(9) << (n->end_ns - n->start_ns) / 1e6 << " ms  " << n->node << " (" << n->op << ", "
          << n->device << ")";
      for (const auto& o : n->outputs)
        if (o.dtype != dtype::invalid) out << " " << name(o.dtype) << o.shape;
      out << "\n";
    }
    return out.str();
  }
};

/// The figures of a traced step, with its `top` slowest nodes.
step_summary summarize(const step_stats& stats, std::size_t top = 10);
#ifndef WEFT_DETAIL_RUNTIME_DECLARED_ONLY
WEFT_DETAIL_RUNTIME_INLINE step_summary summarize(const step_stats& stats, std::size_t top) {
  step_summary s;
  s.nodes = stats.nodes.size();
  if (stats.nodes.empty()) return s;
  std::int64_t first = stats.nodes.front().start_ns, last = stats.nodes.front().end_ns;
  std::map<std::string, op_type_stats> ops;
  std::map<int, bool> threads;
  for (const auto& n : stats.nodes) {
    first = std::min(first, n.start_ns), last = std::max(last, n.end_ns);
    const std::int64_t t = n.end_ns - n.start_ns;
    s.node_ns += t;
    auto& o = ops[n.op];
    o.op = n.op, ++o.count, o.total_ns += t;
    threads[n.thread] = true;
    auto& peak = s.peak_bytes[n.device];
    peak = std::max(peak, n.bytes_in_use);
    s.slowest.push_back(&n);
  }
  s.wall_ns = last - first;
  s.threads = threads.size();
  for (auto& [op, o] : ops) s.by_op.push_back(o);
  std::stable_sort(s.by_op.begin(), s.by_op.end(), [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  std::stable_sort(s.slowest.begin(), s.slowest.end(),
                   [](const auto* a, const auto* b) { return a->end_ns - a->start_ns > b->end_ns - b->start_ns; });
  if (s.slowest.size() > top) s.slowest.resize(top);
  return s;
}
#endif

/// summarize(stats, top) as text, for a terminal.
inline std::string step_stats_summary(const step_stats& stats, std::size_t top = 10) { return summarize(stats, top).to_string(); }

}  // namespace weft

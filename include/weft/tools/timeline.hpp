// Timeline: a traced step as Chrome Trace Event JSON (one process per device, one thread
// row per executor thread, one complete "X" event per node, a flow arrow from each Send to
// its Recv between devices), which Perfetto and chrome://tracing open.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>
#include <string>

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
// Nanoseconds as exact microseconds with three decimals ("1234567.891"): a double through
// the stream's default six significant digits loses everything below a second.
inline void json_micros(std::ostream& out, std::int64_t ns) {
  if (ns < 0) out << '-';
  const std::uint64_t v = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char frac[4];
  std::snprintf(frac, sizeof frac, "%03u", static_cast<unsigned>(v % 1000));
  out << v / 1000 << '.' << frac;
}
}  // namespace detail

inline void write_chrome_trace(std::ostream& out, const step_stats& stats) {
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
    out << "}}";
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
  out << "\n]}\n";
}

inline std::string chrome_trace(const step_stats& stats) {
  std::ostringstream out;
  write_chrome_trace(out, stats);
  return out.str();
}

}  // namespace weft

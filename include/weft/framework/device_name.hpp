/// @file
/// Device names, TensorFlow's: the full form /job:J/replica:R/task:T/device:TYPE:N names one
/// device; a partial spec ("/device:CPU:1", "CPU:1", "/cpu:*", "/task:1", "") leaves fields
/// open and matches every device whose name agrees on the fields it sets. A node's requested
/// device is a spec; a session's devices have full names.
#pragma once

#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

#include <weft/core/error.hpp>

namespace weft {

/// A device's name (whitepaper §3: /job:localhost/replica:0/task:0/device:CPU:0) or a
/// partial spec of one ("/device:GPU:1", "/job:worker"); unset pieces match anything.
struct device_name {
  std::optional<std::string> job;  ///< the job's name
  std::optional<int> replica;      ///< the replica's index
  std::optional<int> task;         ///< the task's index
  std::optional<std::string> type;  ///< upper case: "CPU", "GPU"
  std::optional<int> id;            ///< unset: any (also written "*")

  /// Parses a full name or a partial spec; a malformed one is an invalid_argument error that
  /// quotes it. Accepted pieces, each after a '/': job:NAME, replica:N, task:N, device:TYPE:N
  /// (N or *), device:TYPE, and the short forms TYPE:N and TYPE (cpu:0, CPU, gpu:*); a spec may
  /// also be a bare "TYPE:N" or "TYPE" without a leading '/'.
  static device_name parse(std::string_view spec) {
    device_name d;
    std::string_view rest = spec;
    auto bad = [&](std::string_view why) -> void {
      fail(error_code::invalid_argument, "device spec '", spec, "': ", why,
           " (expected /job:J/replica:R/task:T/device:TYPE:N, or a part of it such as /device:CPU:1 or CPU:1)");
    };
    if (!spec.empty() && spec.front() != '/') {  // "CPU:1", "gpu"
      d.set_type_and_id(spec, bad);
      return d;
    }
    while (!rest.empty()) {
      rest.remove_prefix(1);  // '/'
      const std::size_t end = rest.find('/');
      const std::string_view piece = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
      if (piece.empty()) bad("an empty piece");
      const std::size_t colon = piece.find(':');
      const std::string_view key = piece.substr(0, colon);
      const std::string_view value = colon == std::string_view::npos ? std::string_view{} : piece.substr(colon + 1);
      if (key == "job") {
        if (value.empty()) bad("a job without a name");
        d.job = std::string(value);
      } else if (key == "replica") {
        d.replica = number(value, bad);
      } else if (key == "task") {
        d.task = number(value, bad);
      } else if (key == "device") {
        if (value.empty()) bad("a device without a type");
        d.set_type_and_id(value, bad);
      } else {
        d.set_type_and_id(piece, bad);  // the short forms: /cpu:0, /GPU:1
      }
    }
    return d;
  }

  /// Whether every field is set (a device's own name).
  bool full() const noexcept { return job && replica && task && type && id; }

  /// Whether the device named `full_name` satisfies this spec: every field this spec sets is
  /// equal there.
  bool matches(const device_name& full_name) const {
    return (!job || job == full_name.job) && (!replica || replica == full_name.replica) &&
           (!task || task == full_name.task) && (!type || type == full_name.type) && (!id || id == full_name.id);
  }

  /// The canonical form: the fields that are set, in order ("/job:localhost/.../device:CPU:0";
  /// "/device:CPU:*" for a type with any id).
  std::string str() const {
    std::string out;
    if (job) out += "/job:" + *job;
    if (replica) out += "/replica:" + std::to_string(*replica);
    if (task) out += "/task:" + std::to_string(*task);
    if (type) out += "/device:" + *type + ":" + (id ? std::to_string(*id) : std::string("*"));
    return out;
  }

  /// The full name of the local device TYPE:N: /job:localhost/replica:0/task:0/device:TYPE:N.
  static device_name local(std::string type, int id) { return {"localhost", 0, 0, std::move(type), id}; }

 private:
  template <class Bad>
  static int number(std::string_view s, Bad& bad) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v < 0) bad("'" + std::string(s) + "' is not a number");
    return v;
  }
  /// TYPE, TYPE:N or TYPE:*.
  template <class Bad>
  void set_type_and_id(std::string_view s, Bad& bad) {
    const std::size_t colon = s.find(':');
    std::string t(s.substr(0, colon));
    if (t.empty()) bad("a device without a type");
    for (char& c : t) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') bad("'" + t + "' is not a device type");
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    type = std::move(t);
    if (colon != std::string_view::npos) {
      const std::string_view n = s.substr(colon + 1);
      if (n != "*") id = number(n, bad);
    }
  }
};

}  // namespace weft

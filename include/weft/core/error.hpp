// weft::error: the one exception type weft throws. Its message names what went
// wrong in the user's terms (node, op, dtypes, shapes); `code` lets callers branch.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft {

enum class error_code {
  invalid_argument,  // bad shapes, dtypes, attributes or indices
  not_found,         // unknown op, node, kernel or resource
  already_exists,    // duplicate node name or resource
  failed_precondition,  // e.g. an uninitialized variable
  out_of_range,
  cancelled,
  internal,
  unimplemented,
  data_loss,
};

inline const char* to_string(error_code c) noexcept {
  switch (c) {
    case error_code::invalid_argument: return "invalid argument";
    case error_code::not_found: return "not found";
    case error_code::already_exists: return "already exists";
    case error_code::failed_precondition: return "failed precondition";
    case error_code::out_of_range: return "out of range";
    case error_code::cancelled: return "cancelled";
    case error_code::internal: return "internal";
    case error_code::unimplemented: return "unimplemented";
    case error_code::data_loss: return "data loss";
  }
  return "unknown";
}

class error : public std::runtime_error {
 public:
  error(error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Builds the message from streamable parts: fail(error_code::invalid_argument, "x has ", n, " dims").
template <class... Parts>
[[noreturn]] void fail(error_code code, const Parts&... parts) {
  throw error(code, detail::concat(parts...));
}

}  // namespace weft

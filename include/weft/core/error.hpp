/// @file
/// weft::error: the one exception type weft throws. Its message names what went
/// wrong in the user's terms (node, op, dtypes, shapes); `code` lets callers branch.
#pragma once

#include <initializer_list>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft {

/// What kind of failure a weft::error is (TensorFlow's status codes, the ones weft raises).
enum class error_code {
  invalid_argument,  ///< bad shapes, dtypes, attributes or indices
  not_found,         ///< unknown op, node, kernel or resource
  already_exists,    ///< duplicate node name or resource
  failed_precondition,  ///< e.g. an uninitialized variable
  out_of_range,         ///< past an end: a closed queue's dequeue, an index out of bounds
  cancelled,            ///< a run cancelled through run_options::cancellation
  internal,             ///< a broken invariant of weft's own (a bug: please report it)
  unimplemented,        ///< a case weft does not cover (a gradient that needs a constant, say)
  data_loss,            ///< a corrupt or truncated file (checkpoint, record, model)
  resource_exhausted,  ///< an allocation beyond memory or a session's memory limit
  deadline_exceeded,   ///< a run that outlived its run_options::timeout
};

/// The code as words: "invalid argument", "not found", ...
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
    case error_code::resource_exhausted: return "resource exhausted";
    case error_code::deadline_exceeded: return "deadline exceeded";
  }
  return "unknown";
}

/// What weft throws on bad input or a failed step: a code and a message that names the
/// node, op, dtypes and shapes involved (weft::fail builds it).
class error : public std::runtime_error {
 public:
  /// An error of `code` with `message` (what() returns it).
  error(error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  /// The kind of failure.
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

namespace detail {
/// One part of an error message: a reference to any streamable value and the function that
/// writes it. Messages are built from a list of parts by one non-template function, so a
/// call site compiles one small function per argument type instead of a whole stream
/// expression per combination of argument types.
class message_part {
 public:
  template <class T>
  message_part(const T& value) noexcept : value_(&value), put_(&put<T>) {}
  message_part(const char* text) noexcept : value_(text), put_(&put_text) {}
  void write(std::ostream& out) const { put_(out, value_); }

 private:
  template <class T>
  static void put(std::ostream& out, const void* v) {
    out << *static_cast<const T*>(v);
  }
  static void put_text(std::ostream& out, const void* v) { out << static_cast<const char*>(v); }

  const void* value_;
  void (*put_)(std::ostream&, const void*);
};

inline std::string concat_parts(std::initializer_list<message_part> parts) {
  std::ostringstream out;
  for (const auto& p : parts) p.write(out);
  return out.str();
}

template <class... Parts>
std::string concat(const Parts&... parts) {
  return concat_parts({message_part(parts)...});
}
}  // namespace detail

/// Builds the message from streamable parts: fail(error_code::invalid_argument, "x has ", n, " dims").
template <class... Parts>
[[noreturn]] void fail(error_code code, const Parts&... parts) {
  throw error(code, detail::concat(parts...));
}

}  // namespace weft

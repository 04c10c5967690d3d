/// @file
/// A table of functions by signature string, shared by the threads of a program: how code
/// compiled for a typed subtree (a fused kernel, its gradient) is found again from the
/// signature a node carries in its attrs.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace weft {

/// Functions of type Fn by signature (see the file's comment); thread-safe.
template <class Fn>
class signature_table {
 public:
  /// The process's table.
  static signature_table& global() {
    static auto* instance = new signature_table;  // never destroyed (see op_registry)
    return *instance;
  }
  /// Registers fn for `signature` (the first registration is kept).
  void add(const std::string& signature, Fn fn) {
    std::unique_lock lock(mutex_);
    fns_.emplace(signature, fn);
  }
  /// The function registered for `signature`, or null.
  Fn find(std::string_view signature) const {
    std::shared_lock lock(mutex_);
    auto it = fns_.find(signature);
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, Fn, std::less<>> fns_;
};

}  // namespace weft

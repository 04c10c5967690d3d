/// @file
/// op_registry: every op a graph may use, by name. It knows no op itself: the core ops
/// (<weft/ops/core_ops.hpp>) are added by every graph and by the CPU kernels' registration,
/// the standard families as a program registers them, and users add their own with
/// register_op() without touching the library.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <weft/framework/op_def.hpp>

namespace weft {

/// Op definitions by name (whitepaper §2): what graph::op checks a node against. The
/// process's (global()) starts with the core ops; families add theirs when registered.
class op_registry {
 public:
  /// Registers `def`; an op of the same name is an error (ops are never replaced, so a
  /// graph's meaning cannot change under it).
  const op_def& add(op_def def) {
    std::unique_lock lock(mutex_);
    return add_locked(std::move(def));
  }
  /// Adds the definitions `defs()` returns under the name `family`, once: later calls with
  /// the same family do nothing, so every user of a family may call it. When one of its
  /// ops is already registered (by the user, under a standard name), none is added.
  void add_family(std::string_view family, std::vector<op_def> (*defs)()) {
    {
      std::shared_lock lock(mutex_);
      if (families_.contains(family)) return;
    }
    std::unique_lock lock(mutex_);
    if (families_.contains(family)) return;
    auto list = defs();
    for (const auto& d : list)
      if (ops_.contains(d.name))
        fail(error_code::already_exists, "op_registry: cannot add the ", family, " ops: op '", d.name,
             "' is already registered");
    for (auto& d : list) add_locked(std::move(d));
    families_.emplace(family);
  }
  /// nullptr when no op of that name is registered. Returned definitions live as long as the registry.
  const op_def* find(std::string_view name) const {
    std::shared_lock lock(mutex_);
    auto it = ops_.find(name);
    return it == ops_.end() ? nullptr : it->second.get();
  }
  /// Every registered op's name, sorted.
  std::vector<std::string> names() const {
    std::shared_lock lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, def] : ops_) out.push_back(name);
    return out;
  }

  /// The process's registry.
  static op_registry& global() {
    static op_registry* instance = new op_registry;  // never destroyed: kernels may look ops up during static destruction
    return *instance;
  }

 private:
  const op_def& add_locked(op_def def) {
    auto name = def.name;
    auto [it, inserted] = ops_.try_emplace(name, std::make_unique<op_def>(std::move(def)));
    if (!inserted) fail(error_code::already_exists, "op_registry: op '", name, "' is already registered");
    return *it->second;
  }

  mutable std::shared_mutex mutex_;
  std::set<std::string, std::less<>> families_;
  std::map<std::string, std::unique_ptr<op_def>, std::less<>> ops_;
};

/// Builds and registers an op (docs/extending.md); a second op of the same name is an error.
inline const op_def& register_op(const op_def_builder& builder) { return op_registry::global().add(builder.build()); }

}  // namespace weft

// op_registry: every op a graph may use, by name. The standard ops are registered on
// first use; users add their own with register_op() without touching the core.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include <weft/graph/op_def.hpp>
#include <weft/ops/array_ops.hpp>
#include <weft/ops/math_ops.hpp>
#include <weft/ops/matrix_ops.hpp>
#include <weft/ops/random_ops.hpp>
#include <weft/ops/reduction_ops.hpp>
#include <weft/ops/state_ops.hpp>

namespace weft {

class op_registry {
 public:
  // Registers `def`; an op of the same name is an error (ops are never replaced, so a
  // graph's meaning cannot change under it).
  const op_def& add(op_def def) {
    std::unique_lock lock(mutex_);
    auto name = def.name;
    auto [it, inserted] = ops_.try_emplace(name, std::make_unique<op_def>(std::move(def)));
    if (!inserted) fail(error_code::already_exists, "op_registry: op '", name, "' is already registered");
    return *it->second;
  }
  // nullptr when no op of that name is registered. Returned definitions live as long as the registry.
  const op_def* find(std::string_view name) const {
    std::shared_lock lock(mutex_);
    auto it = ops_.find(name);
    return it == ops_.end() ? nullptr : it->second.get();
  }
  std::vector<std::string> names() const {
    std::shared_lock lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, def] : ops_) out.push_back(name);
    return out;
  }

  static op_registry& global() {
    static op_registry* instance = [] {
      auto* r = new op_registry;  // never destroyed: kernels may look ops up during static destruction
      for (auto* defs : {ops::math_op_defs, ops::array_op_defs, ops::reduction_op_defs, ops::matrix_op_defs,
                         ops::random_op_defs, ops::state_op_defs})
        for (auto& d : defs()) r->add(std::move(d));
      return r;
    }();
    return *instance;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<op_def>, std::less<>> ops_;
};

inline const op_def& register_op(const op_def_builder& builder) { return op_registry::global().add(builder.build()); }

}  // namespace weft

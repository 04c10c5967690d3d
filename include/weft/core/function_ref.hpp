/// @file
/// A non-owning reference to a callable, as C++26's std::function_ref: a pointer to the
/// callable and one to a function that calls it, nothing allocated. For parameters that are
/// called during the call and not kept (parallel_for's body): a std::function there costs a
/// heap allocation a call once its lambda captures more than two references.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace weft {

template <class Signature>
class function_ref;

/// A reference to a callable taking Args... and returning R; the callable must outlive it.
template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  /// A reference to f (not a copy: f must outlive the reference, as a temporary argument
  /// outlives the call it is passed to).
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, Args...>)
  function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): a lambda converts, as to std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<F>*>(object), std::forward<Args>(args)...);
        }) {}

  /// Calls the referenced callable.
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace weft

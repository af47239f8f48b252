// callback_scope.hpp (private) — `CallbackScope`: marks the current thread as running user code
// (a handler, an outcome callback, a deadline's cancellation callbacks, an overrun report) on
// behalf of one runtime, so that the runtime can refuse calls that would wait for themselves
// (`shutdown()` from inside its own handler or callback).
//
// Thread safety: each thread has its own chain of scopes; a scope lives on one thread's stack.
#pragma once

namespace sandglass::detail {

class CallbackScope {
 public:
  // `runtime` identifies the runtime whose user code runs inside this scope.
  explicit CallbackScope(const void* runtime) noexcept : runtime_{runtime}, outer_{innermost_} {
    innermost_ = this;
  }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  ~CallbackScope() { innermost_ = outer_; }

  // True if this thread is inside user code run for `runtime` (at any depth: a handler of one
  // runtime may submit to another, whose rejection callback runs nested).
  static bool inside(const void* runtime) noexcept {
    for (const CallbackScope* s = innermost_; s != nullptr; s = s->outer_) {
      if (s->runtime_ == runtime) return true;
    }
    return false;
  }

 private:
  static inline thread_local const CallbackScope* innermost_ = nullptr;
  const void* runtime_;
  const CallbackScope* outer_;
};

}  // namespace sandglass::detail

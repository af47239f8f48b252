// cancel.hpp — `CancelSource` and `CancelToken`: cooperative cancellation that carries its cause.
//
//   sandglass::CancelSource source;
//   sandglass::CancelToken token = source.token();
//   auto reg = token.on_cancel([&]() noexcept { socket.close(); });
//   source.cancel(sandglass::CancelCause::caller);   // runs the callback once
//   token.cancelled();                               // true; token.cause() == caller
//
//   sandglass::CancelSource child{token};            // a parent's cancellation reaches the
//                                                    // child with cause `upstream`
//
// The first cause wins: later `cancel()` calls change nothing and return false.
// Checking a token (`cancelled()`, `cause()`) is one atomic load. Callbacks are `noexcept`, run
// exactly once, on the thread that cancels, outside any lock of this library; a callback
// registered after cancellation runs at once on the registering thread. Destroying a
// `CancelRegistration` deregisters its callback; if the callback is running on another thread
// at that moment, the destructor blocks until it has returned, so whatever it captures may be
// destroyed right after.
//
// Built on `std::stop_source` / `std::stop_callback`. A state that nobody registers a callback
// with is two words, set up without a lock or an allocation: the stop_source and the parent
// link are made on the first registration. Sources and tokens share the state through an
// intrusive reference count inside it (no separate control block); a state that is part of a
// larger object (a runtime's job record) keeps that object alive, so a token may outlive the
// job it came from and still answers `cancelled()` and `cause()`.
//
// Thread safety: `CancelSource`, `CancelToken`: distinct objects: safe. Shared objects: safe;
// every member function may be called concurrently. `CancelRegistration`: unsafe when shared.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <type_traits>
#include <utility>

namespace sandglass {

enum class CancelCause : std::uint8_t {
  none,      // not cancelled
  caller,    // whoever submitted the work gave up (DELETE, disconnect, JobHandle::cancel)
  deadline,  // the job's deadline passed
  upstream,  // a parent token was cancelled
  shutdown,  // the runtime is shutting down and the drain time is over
};

std::string_view to_string(CancelCause cause) noexcept;
std::optional<CancelCause> cancel_cause_from_string(std::string_view name) noexcept;

// A callback for `on_cancel`: callable without arguments and declared noexcept.
template <typename F>
concept CancelCallback = std::is_nothrow_invocable_v<std::decay_t<F>&>;

namespace detail {

class CancelStateRef;

// Shared by a source and its tokens.
class CancelState {
 public:
  CancelState() noexcept = default;
  CancelState(const CancelState&) = delete;
  CancelState& operator=(const CancelState&) = delete;
  ~CancelState();

  // Pairs with the seq_cst exchange in `signal()`: whoever sees the cause also sees what the
  // canceller wrote before cancelling. A closed state reads as never cancelled.
  CancelCause cause() const noexcept { return decode(word_.load(std::memory_order_acquire)); }

  // Stores `cause` if none is stored yet and the state is not closed, then runs the callbacks.
  // True for the first call.
  bool cancel(CancelCause cause) noexcept {
    if (!signal(cause)) return false;
    run_callbacks();
    return true;
  }
  // The first half of `cancel()`: stores the cause (checks see it at once) but runs no
  // callback. True for the first call; the caller must then call `run_callbacks()`, on any
  // thread. Until it does, callbacks registered before the signal have not run; callbacks
  // registered after it run at once on the registering thread.
  bool signal(CancelCause cause) noexcept;
  // The second half of `cancel()`: runs the callbacks registered so far, on this thread.
  void run_callbacks() noexcept;
  // Ends the state's life as something that can be cancelled: a later `cancel()` or
  // `signal()` returns false. Returns the cause stored before, or `none` (after which the state
  // stays uncancelled). The runtime closes a job's state when its handler returns, so that
  // "cancelled" and "finished" cannot both win.
  CancelCause close() noexcept;

  // A token to register a callback with, or nullopt when the state is already cancelled (the
  // caller then runs its callback itself). The stop_source is created on first use (installed
  // by compare-and-swap), so a state that nobody registers with costs no allocation. On a
  // closed state the token is never stopped.
  std::optional<std::stop_token> stop_token_for_callback();

  // Makes a cancellation of `parent` cancel this state with cause `upstream`.
  void link_to(const CancelStateRef& parent);

  // The intrusive reference count (see CancelStateRef). A state starts with one reference,
  // its maker's. add_ref is relaxed (a new reference is made from one already held);
  // drop_ref is acq_rel, so that whoever drops the last one sees every write made through the
  // others before it frees the state. True when the last reference went.
  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  bool drop_ref() noexcept { return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  std::uint32_t use_count() const noexcept { return refs_.load(std::memory_order_relaxed); }

 private:
  struct Forward {
    CancelState* child;
    void operator()() const noexcept { child->cancel(CancelCause::upstream); }
  };
  // word_ holds a CancelCause, or kClosed.
  static constexpr std::uint8_t kClosed = 0xff;
  static CancelCause decode(std::uint8_t word) noexcept {
    return word == kClosed ? CancelCause::none : static_cast<CancelCause>(word);
  }

  // What only a state with callbacks or a parent needs (defined in cancel.cpp).
  struct Callbacks;
  // Made by the first caller that needs it; never replaced (see stop_token_for_callback).
  Callbacks& callbacks();

  std::atomic<std::uint8_t> word_{static_cast<std::uint8_t>(CancelCause::none)};
  std::atomic<std::uint32_t> refs_{1};  // beside word_: no padding
  std::atomic<Callbacks*> callbacks_{nullptr};
};

// A counted reference to a CancelState: what sources, tokens and a child's parent link hold.
// `destroy` frees the state, or the object the state is part of, when the last reference
// goes; it travels with the reference, so that the state needs no room for it.
class CancelStateRef {
 public:
  using Destroy = void (*)(CancelState&) noexcept;

  CancelStateRef() noexcept = default;
  // Takes over one reference to `state` that the caller holds.
  static CancelStateRef adopt(CancelState* state, Destroy destroy) noexcept {
    CancelStateRef r;
    r.state_ = state;
    r.destroy_ = destroy;
    return r;
  }
  CancelStateRef(const CancelStateRef& other) noexcept
      : state_{other.state_}, destroy_{other.destroy_} {
    if (state_ != nullptr) state_->add_ref();
  }
  CancelStateRef(CancelStateRef&& other) noexcept
      : state_{std::exchange(other.state_, nullptr)}, destroy_{other.destroy_} {}
  CancelStateRef& operator=(CancelStateRef other) noexcept {
    std::swap(state_, other.state_);
    std::swap(destroy_, other.destroy_);
    return *this;
  }
  ~CancelStateRef() { reset(); }

  void reset() noexcept {
    if (CancelState* s = std::exchange(state_, nullptr); s != nullptr && s->drop_ref()) destroy_(*s);
  }
  CancelState* get() const noexcept { return state_; }
  CancelState* operator->() const noexcept { return state_; }
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  CancelState* state_ = nullptr;
  Destroy destroy_ = nullptr;
};

}  // namespace detail

// Keeps a callback registered; destroying it deregisters the callback (see the file comment).
class CancelRegistration {
 public:
  CancelRegistration() = default;
  CancelRegistration(CancelRegistration&&) noexcept = default;
  CancelRegistration& operator=(CancelRegistration&&) noexcept = default;
  ~CancelRegistration() = default;

  // True while a callback is registered (an empty registration is what a token that can never
  // be cancelled hands out).
  explicit operator bool() const noexcept { return callback_ != nullptr; }
  // Deregisters now. Blocks while the callback runs on another thread.
  void reset() noexcept { callback_.reset(); }

 private:
  friend class CancelToken;
  using Callback = std::stop_callback<std::function<void()>>;
  explicit CancelRegistration(std::unique_ptr<Callback> callback) noexcept
      : callback_{std::move(callback)} {}

  std::unique_ptr<Callback> callback_;
};

class CancelToken {
 public:
  // A token that is never cancelled.
  CancelToken() noexcept = default;

  // One atomic load.
  bool cancelled() const noexcept { return state_ && state_->cause() != CancelCause::none; }
  CancelCause cause() const noexcept { return state_ ? state_->cause() : CancelCause::none; }
  // False for a default-constructed token.
  bool can_be_cancelled() const noexcept { return static_cast<bool>(state_); }

  // Registers `callback` to run once on cancellation (at once if already cancelled).
  template <CancelCallback F>
  [[nodiscard]] CancelRegistration on_cancel(F&& callback) const {
    if (!state_) return {};
    std::optional<std::stop_token> token = state_->stop_token_for_callback();
    if (!token) {
      std::invoke(callback);
      return {};
    }
    return CancelRegistration{std::make_unique<CancelRegistration::Callback>(
        std::move(*token), std::function<void()>{std::forward<F>(callback)})};
  }

 private:
  friend class CancelSource;
  friend struct CancelAccess;
  explicit CancelToken(detail::CancelStateRef state) noexcept : state_{std::move(state)} {}

  detail::CancelStateRef state_;
};

class CancelSource {
 public:
  CancelSource();
  // A child: cancelling `parent` cancels this source with cause `upstream`.
  explicit CancelSource(const CancelToken& parent);

  // Records `cause` and runs the callbacks, if nothing was recorded before. True for the first
  // call. Passing `CancelCause::none` does nothing and returns false.
  bool cancel(CancelCause cause) const noexcept {
    return cause != CancelCause::none && state_->cancel(cause);
  }
  bool cancelled() const noexcept { return state_->cause() != CancelCause::none; }
  CancelCause cause() const noexcept { return state_->cause(); }
  CancelToken token() const noexcept { return CancelToken{state_}; }

 private:
  friend struct CancelAccess;
  explicit CancelSource(detail::CancelStateRef state) noexcept : state_{std::move(state)} {}

  detail::CancelStateRef state_;
};

// For code of this library that embeds a `CancelState` in a larger object (one allocation per
// job): builds sources and tokens around an existing state. `state` is the token's state (not a
// reference of its own; null for a token that is never cancelled).
struct CancelAccess {
  static CancelSource source(detail::CancelStateRef state) noexcept {
    return CancelSource{std::move(state)};
  }
  static CancelToken token(detail::CancelStateRef state) noexcept {
    return CancelToken{std::move(state)};
  }
  static detail::CancelState* state(const CancelToken& token) noexcept { return token.state_.get(); }
  static const detail::CancelStateRef& ref(const CancelToken& token) noexcept { return token.state_; }
};

}  // namespace sandglass

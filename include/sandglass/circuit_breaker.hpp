// circuit_breaker.hpp — `CircuitBreaker`: stops calls to a dependency that is down, so that
// they fail at once instead of holding a worker, and lets one probe find out when it is back.
//
//   sandglass::CircuitBreaker breaker{{.failure_threshold = 3, .cooldown = 4s}};
//   sandglass::CircuitBreaker::Permit permit = breaker.try_acquire();
//   if (!permit) return fail(sandglass::Reason::breaker_open, permit.retry_after());
//   if (call_dependency()) permit.record_success(); else permit.record_failure();
//
// States: `closed` lets every call through and counts consecutive failures; at
// `failure_threshold` it turns `open`. `open` rejects every call at once until `cooldown` has
// passed since it opened; the first call after that turns it `half_open` and is the probe.
// `half_open` rejects every other call while the probe is out. The probe's success closes the
// breaker (the failure count starts again at zero); its failure opens it again with a new
// cooldown. The open → half_open step happens in `try_acquire`, so `state()` still says `open`
// after the cooldown until somebody asks.
//
// Results are recorded through the permit, so only results that still mean something count:
// while half-open only the probe's; while closed only those of calls admitted since the
// breaker last closed. A late result from before the breaker opened changes nothing. A probe
// permit destroyed without a result (the caller was cancelled, or never sent the request) gives
// the probe back: the next caller probes.
//
// One breaker per dependency (an upstream, an address), not per service: one slow endpoint must
// not stop calls to the others.
//
// Time rules: the breaker reads time only from its clock, at `try_acquire` and when a failure
// opens it. The clock is the steady clock unless one is injected (tests drive ticks).
//
// Thread safety: `CircuitBreaker`: distinct objects: safe. Shared objects: safe; every member
// function may be called concurrently (one mutex). The injected clock is called under that
// mutex. `Permit`: unsafe when shared; it must not outlive its breaker.
#pragma once

#include <sandglass/deadline.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace sandglass {

enum class BreakerState : std::uint8_t { closed, open, half_open };

// "closed", "open", "half_open".
std::string_view to_string(BreakerState state) noexcept;

struct CircuitBreakerOptions {
  int failure_threshold = 5;                 // consecutive failures that open the breaker; ≥ 1
  Duration cooldown = std::chrono::seconds{5};  // time open before a probe may pass; ≥ 0

  // Empty when consistent, else a message naming the offending field.
  std::string validate() const;
};

class CircuitBreaker {
 public:
  // Returns the current time. Must not call back into the breaker.
  using NowFunction = std::function<TimePoint()>;

  // An answer of `try_acquire`: a call may go ahead (and then reports its result through this
  // permit), or it is rejected. Move-only.
  class Permit {
   public:
    // A rejected permit.
    Permit() noexcept = default;
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    // Gives an unanswered probe back (see the file comment).
    ~Permit();

    bool allowed() const noexcept { return breaker_ != nullptr; }
    explicit operator bool() const noexcept { return allowed(); }
    // This call is the half-open breaker's one probe.
    bool is_probe() const noexcept { return probe_; }
    // For a rejected permit: how long until a probe may pass (the rest of the cooldown; the
    // whole cooldown while another probe is out). Zero for an allowed permit.
    Duration retry_after() const noexcept { return retry_after_; }

    // The call worked, or the dependency answered (a 4xx is the caller's fault, not the
    // dependency's). Only the first result of a permit counts; a rejected permit ignores it.
    void record_success() noexcept;
    // The dependency failed: no connection, no answer in time, 5xx, 429.
    void record_failure() noexcept;

   private:
    friend class CircuitBreaker;
    Permit(CircuitBreaker* breaker, bool probe, std::uint64_t epoch) noexcept
        : breaker_{breaker}, probe_{probe}, epoch_{epoch} {}
    explicit Permit(Duration retry_after) noexcept : retry_after_{retry_after} {}

    CircuitBreaker* breaker_ = nullptr;  // null once rejected or answered
    bool probe_ = false;
    std::uint64_t epoch_ = 0;            // the breaker's epoch when this permit was granted
    Duration retry_after_{};
  };

  // `now` empty means the steady clock.
  explicit CircuitBreaker(CircuitBreakerOptions options = {}, NowFunction now = {});
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Decides at once whether a call may go ahead; never blocks on the dependency.
  [[nodiscard]] Permit try_acquire();

  // For metrics: closed, open or half_open (a probe is out, or was given back).
  BreakerState state() const;
  const CircuitBreakerOptions& options() const noexcept { return options_; }

 private:
  enum class Result : std::uint8_t { success, failure, abandoned };
  void record(const Permit& permit, Result result) noexcept;
  void open_locked(TimePoint now);

  const CircuitBreakerOptions options_;
  const NowFunction now_;

  mutable std::mutex mu_;
  BreakerState state_ = BreakerState::closed;  // guarded by mu_
  int failures_ = 0;                           // guarded by mu_: consecutive, while closed
  TimePoint opened_at_{};                      // guarded by mu_
  bool probe_out_ = false;                     // guarded by mu_: while half_open
  std::uint64_t epoch_ = 0;                    // guarded by mu_: +1 at each state change
};

}  // namespace sandglass

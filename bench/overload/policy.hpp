// policy.hpp — `Policy`: one way to queue and run the bench's jobs. Four of them run side by
// side with the same workers and the same job bodies:
//
//   fifo          boost::asio::thread_pool: an unbounded FIFO that runs everything
//   bounded-fifo  a mutex + condition variable + deque with a capacity: rejects when full,
//                 runs all it accepted
//   drop-expired  the same deque, unbounded: no admission, no cancellation, but a job whose
//                 deadline passed is dropped when a worker takes it
//   sandglass     sandglass::Runtime: admission, EDF classes, drop at dequeue, cancellation
//
//   auto p = make_policy("sandglass", {.workers = 8, .capacity = 1024, .body = Body::sleep});
//   p->submit(rec, i);     // never waits for the job; its fate lands in `rec`
//   p->abandon();          // the point is over: whatever has not started is recorded expired
//
// Thread safety: `submit` is called by one thread (the generator) at a time; `abandon` and
// `peak_queue_depth` from any thread. The destructor joins the policy's threads; every
// recorder passed to `submit` must outlive it or have all its jobs finished.
#pragma once

#include "hints.hpp"
#include "job_body.hpp"
#include "recorder.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace sandglass::bench {

struct PolicyOptions {
  std::size_t workers = 8;
  std::size_t capacity = 1024;  // queue capacity of bounded-fifo and sandglass
  Body body = Body::sleep;
  // Sandglass's knobs (RuntimeOptions).
  double estimate_quantile = 0.99;  // the Runtime's default
  Duration estimate_max_age = std::chrono::milliseconds{20};  // the Runtime's default
  bool drop_if_cannot_finish = true;
  Hints hints{};  // what size each job says it has (JobSpec::expected)
  std::uint64_t seed = 1;  // of the noisy hints
};

class Policy {
 public:
  virtual ~Policy() = default;
  // Hands job `i` of `rec` over without waiting for it. Its fate is recorded in `rec`, maybe
  // before this returns (a rejection).
  virtual void submit(Recorder& rec, std::size_t i) = 0;
  // Jobs not yet started are recorded as expired without running, now or when a worker
  // reaches them. Only called after every deadline of the run has passed.
  virtual void abandon() = 0;
  // Most jobs waiting at once (handed over, neither started nor dropped) since construction
  // or the last reset_peak().
  std::size_t peak_queue_depth() const noexcept { return peak_.load(std::memory_order_relaxed); }
  // Starts a new peak from the current depth (after a warm-up). Called by the generator.
  void reset_peak() noexcept {
    peak_.store(static_cast<std::size_t>(std::max<std::ptrdiff_t>(
                    depth_.load(std::memory_order_relaxed), 0)),
                std::memory_order_relaxed);
  }

 protected:
  // A job entered the queue. Called by the generator only, so the peak needs no CAS loop.
  void note_queued() noexcept {
    const std::ptrdiff_t now = depth_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (now > 0 && static_cast<std::size_t>(now) > peak_.load(std::memory_order_relaxed)) {
      peak_.store(static_cast<std::size_t>(now), std::memory_order_relaxed);
    }
  }
  // A job left the queue: it started, or was dropped, shed or abandoned.
  void note_left() noexcept { depth_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::ptrdiff_t> depth_{0};
  std::atomic<std::size_t> peak_{0};
};

// The names `make_policy` knows, in the bench's default order.
const std::vector<std::string_view>& policy_names();
// nullptr for an unknown name.
std::unique_ptr<Policy> make_policy(std::string_view name, const PolicyOptions& options);

// One constructor per file.
std::unique_ptr<Policy> make_fifo_policy(const PolicyOptions& options);
std::unique_ptr<Policy> make_queue_policy(const PolicyOptions& options, bool bounded,
                                          bool drop_expired);
std::unique_ptr<Policy> make_sandglass_policy(const PolicyOptions& options);

}  // namespace sandglass::bench

// standing_queue.hpp (private) — `StandingQueue`: whether the runtime's queue stands, that is,
// has kept every job it started waiting longer than a target delay for a whole interval, as
// CoDel tells a bad queue from a good one: the minimum sojourn (a job's queue wait when it
// starts) over an interval above the target. A burst that drains within an interval never
// counts; an empty queue, or one job that waited less than the target, ends it at once.
//
//   StandingQueue q{Duration::zero()};          // adaptive target
//   q.on_run(run_time);                         // a worker, after each run (under the lock)
//   q.on_start(now - enqueued_at, now);         // a worker, as it starts a job
//   q.on_empty();                               // a worker that found the queue empty
//   if (q.standing()) limit = q.target();       // a submitter: admit only jobs predicted to
//                                               // start within `limit`
//
// While a queue stands, admission takes only jobs predicted to start within the target delay
// of now (DeadlineQueue's Load::start_within): the queue then holds what keeps the workers
// busy, not all that could just finish in time. The target is fixed when given, else adaptive:
// kRunsOfTarget × a slowly moving mean of all run times (a queue that holds a job or two per
// worker keeps every worker busy), at least kMinTarget. The interval is kIntervalTargets
// targets, at least kMinInterval (CoDel's 100 ms): a batch that drains within it is a burst.
//
// Thread safety: on_run, on_start and on_empty by one writer at a time (the runtime's: under
// its mutex; a cluster node's: its claimer thread); standing() and target() from any thread
// (relaxed: a hint admission reads; each is written only when it changes).
#pragma once

#include <sandglass/deadline.hpp>

#include <atomic>
#include <cstdint>

namespace sandglass::detail {

class StandingQueue {
 public:
  static constexpr Duration kMinTarget = std::chrono::milliseconds{1};
  static constexpr std::int64_t kRunsOfTarget = 2;
  static constexpr std::int64_t kIntervalTargets = 10;
  static constexpr Duration kMinInterval = std::chrono::milliseconds{100};

  // `fixed_target`: the target delay; zero or less: adaptive.
  explicit StandingQueue(Duration fixed_target) noexcept;

  // A run ended that took `run_time`: moves the adaptive target.
  void on_run(Duration run_time) noexcept;
  // A job starts at `now` after waiting `sojourn` in the queue.
  void on_start(Duration sojourn, TimePoint now) noexcept;
  // A worker found nothing queued: no queue stands.
  void on_empty() noexcept;

  bool standing() const noexcept { return standing_.load(std::memory_order_relaxed); }
  Duration target() const noexcept { return Duration{target_ns_.load(std::memory_order_relaxed)}; }
  bool adaptive() const noexcept { return fixed_ <= Duration::zero(); }

 private:
  void set_standing(bool standing) noexcept;

  const Duration fixed_;
  // The writer's (see Thread safety).
  double mean_run_ns_ = 0;       // a slowly moving mean of the run times (adaptive target)
  bool has_run_ = false;
  bool above_ = false;           // every start since above_since_ waited longer than the target
  TimePoint above_since_{};
  // Read by submitters: a line of its own, written when a value changes.
  alignas(64) std::atomic<bool> standing_{false};
  std::atomic<Duration::rep> target_ns_;
};

}  // namespace sandglass::detail

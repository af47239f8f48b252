// prediction_error.hpp (private) — `PredictionError`: how far the runtime's own predictions
// miss, and the margin admission adds for that; `TailSketch`, the small histogram that keeps
// the recent misses.
//
// Admission predicts when a job starts (the work ahead of it ÷ workers + what running jobs
// still need) and how long it runs (its estimate key's tail estimate). Both miss: a preempted
// worker or submitter, a hand-off slower than usual, an estimate that lags a change. The
// runtime records each miss as it happens (actual − predicted start as a job starts, actual −
// predicted run as a run ends, and their sum, actual − predicted finish; for a job dropped
// unstarted, how late it already was: the miss that matters most), keeps the recent ones
// of each in a TailSketch, and adds the finish error's tail (kMarginQuantile, never below zero) to
// every predicted finish: a noisy machine gets a wide margin, a quiet one a thin one. The tail
// of the sum, not the sum of the two tails: a job that starts late seldom also runs longer
// than its (already high) tail estimate, and stacking both tails refuses work a worker could
// finish in time.
//
//   PredictionError e;
//   e.on_start(predicted_start, now);               // a worker, as it starts a job
//   e.on_finish(predicted_start, started_at,        // a worker, as its run ends
//               estimate, run_time, ended_at);
//   e.on_drop(predicted_start, now);                // a worker or the timer, as it drops a
//                                                   // queued job that can no longer finish
//   Duration m = e.margin();                        // a submitter: start + estimate + m
//
// The margin is added to the predicted finish, never to the predicted start (nor to the run
// estimate) the errors are measured against: a wider margin does not make the next errors
// look smaller, so it cannot swing.
//
// Thread safety: on_start, on_finish and on_drop by one thread at a time (the runtime's
// mutex); margin(), start_tail() and run_tail() from any thread (relaxed loads of figures
// published when they change).
#pragma once

#include <sandglass/deadline.hpp>

#include <array>
#include <atomic>
#include <cstdint>

namespace sandglass::detail {

// A histogram of durations on a log scale, four buckets per power of two of nanoseconds, plus
// one bucket for every duration of zero or less. It reports the upper end of a bucket: at
// most a quarter above the truth. Old samples fade: all counts are halved once kWindow
// samples were added since the last halving, or kMaxAge passed since it.
//
// Thread safety: distinct objects: safe; shared objects: unsafe.
class TailSketch {
 public:
  static constexpr std::uint32_t kWindow = 1024;
  static constexpr Duration kMaxAge = std::chrono::seconds{5};
  static constexpr std::size_t kBuckets = 1 + 4 * 62;

  // Adds `d` observed at `now` (halving first when that is due).
  void add(Duration d, TimePoint now) noexcept;
  // The smallest bucket end b such that at most (1 − q) of the samples lie above b; zero when
  // that is the bucket of zero or less, or when the sketch is empty. O(buckets).
  Duration quantile(double q) const noexcept;
  // Samples as counted now (halvings included).
  std::uint64_t count() const noexcept { return total_; }

 private:
  static std::size_t bucket_of(Duration d) noexcept;
  static Duration end_of(std::size_t bucket) noexcept;
  void halve(TimePoint now) noexcept;

  std::array<std::uint32_t, kBuckets> counts_{};
  std::uint64_t total_ = 0;
  std::size_t highest_ = 0;  // no sample lies above this bucket
  std::uint32_t since_halved_ = 0;
  TimePoint halved_at_{};
  bool started_ = false;
};

class PredictionError {
 public:
  // The tails reported for starts and runs.
  static constexpr double kQuantile = 0.99;
  // The finish error's quantile that is the margin: lower than the run estimate's own (a high
  // tail already), so that the margin covers predictions that miss often, not each rare miss
  // twice; a p99 margin on a busy machine refused most jobs that workers left idle would have
  // finished in time.
  static constexpr double kMarginQuantile = 0.9;
  // The tails are computed again every kPublishEvery calls of on_start and on_finish (a walk
  // over the buckets; one per sample would cost more than the rest of a hand-off's bookkeeping).
  static constexpr std::uint32_t kPublishEvery = 16;

  // A job predicted to start at `predicted` starts at `now`.
  // A `predicted` of the clock's epoch is no prediction and is skipped.
  void on_start(TimePoint predicted, TimePoint now) noexcept;
  // A job predicted to start at `predicted_start` (the epoch: none) and started at
  // `started_at` ran `actual_run`, predicted `predicted_run` (its tail estimate; zero: none),
  // and ended at `ended_at`. Without a predicted run it is no sample; without a predicted start
  // it is a sample of the run only.
  void on_finish(TimePoint predicted_start, TimePoint started_at, Duration predicted_run,
                 Duration actual_run, TimePoint ended_at) noexcept;
  // A job predicted to start at `predicted` (the epoch: none) left the queue unstarted at
  // `now`: it could no longer finish (too_late_to_start) or its deadline passed. It would have
  // started at `now` at the earliest, so `now − predicted` is a sample of the start error (a
  // lower bound) and of the finish error: exactly the smallest margin that would have refused
  // it at admission (start + estimate + margin past its deadline), where a promise was broken.
  void on_drop(TimePoint predicted, TimePoint now) noexcept;

  // The tail of actual − predicted start, of actual − predicted run, and of actual − predicted
  // finish, as last published; never negative.
  Duration start_tail() const noexcept { return Duration{start_tail_ns_.load(std::memory_order_relaxed)}; }
  Duration run_tail() const noexcept { return Duration{run_tail_ns_.load(std::memory_order_relaxed)}; }
  // What admission adds to each predicted finish: the finish error's tail.
  Duration margin() const noexcept { return Duration{margin_ns_.load(std::memory_order_relaxed)}; }

 private:
  void publish() noexcept;

  // Written by one thread at a time (the class comment).
  TailSketch starts_;
  TailSketch runs_;
  TailSketch finishes_;
  std::uint32_t unpublished_ = 0;
  // Read by submitters: a line of its own, written when a value changes.
  alignas(64) std::atomic<Duration::rep> start_tail_ns_{0};
  std::atomic<Duration::rep> run_tail_ns_{0};
  std::atomic<Duration::rep> margin_ns_{0};
};

}  // namespace sandglass::detail

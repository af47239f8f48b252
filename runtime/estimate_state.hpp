// estimate_state.hpp (private) — `EstimateState`, one estimate key's run times as the runtime
// keeps them, and `SampleBatch`, the run-time samples a worker gathers before handing them over.
//
//   SampleBatch& batch = ...;                 // one per worker
//   batch.add(state, run_time, end);          // hands the batch over first when it is full or
//                                             // holds another key's samples
//   batch.flush();                            // before the outcome is published to a handle,
//                                             // and before the worker waits for work
//
// A worker that records every run under the estimator's lock makes the estimator's cache lines
// (and the published figures every submitter reads) travel between cores for each job. A batch
// takes the lock once for up to kSampleBatch runs of one key and publishes the figures once.
// What a batch defers is only when a sample arrives, never what it says: the estimator sees
// the same samples with the same times, in the same order per worker.
//
// Thread safety: `EstimateState`: every member function may be called concurrently.
// `SampleBatch`: distinct objects: safe; shared objects: unsafe (each belongs to one worker).
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/runtime.hpp>
#include <sandglass/service_time_estimator.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <span>
#include <string>

namespace sandglass::detail {

// One run's sample: how long it ran and when it ended.
struct RunSample {
  Duration run_time{};
  TimePoint ended_at{};
};

// One estimate key's run times (JobSpec::estimate_key, else the kind). The estimator has its
// own lock, never taken under the runtime's: recording a run and aging samples stay out of the
// runtime's critical section, and submitters read the figures it last published without a lock.
class EstimateState {
 public:
  struct Figures {
    Duration tail{};
    Duration central{};
  };
  EstimateState(std::string kind, ServiceTimeEstimator e)
      : kind_{std::move(kind)}, estimator_{std::move(e)} {}

  // The figures at `now`: ages the samples first when that is due and the estimator is free
  // (else the figures published last). The two figures may come from consecutive updates.
  Figures figures(TimePoint now);
  // Adds runs, in order, and publishes the new figures once.
  void record(std::span<const RunSample> runs);
  // The estimate as of its last update, named `key`. Takes the estimator's lock.
  EstimateSnapshot snapshot(const std::string& key);

 private:
  void publish_figures() noexcept;  // requires estimator_mu_

  const std::string kind_;  // the kind of the job that first used the key
  std::mutex estimator_mu_;
  ServiceTimeEstimator estimator_;  // guarded by estimator_mu_
  // Relaxed: each is a figure on its own; a reader that must see a run's sample (a waiter on
  // that job's outcome) is ordered by the outcome's publication, which comes after record().
  std::atomic<Duration::rep> tail_ns_{0};
  std::atomic<Duration::rep> central_ns_{0};
  std::atomic<TimePoint::rep> age_due_ns_{TimePoint::max().time_since_epoch().count()};
};

// Samples of one estimate key that one worker gathered, not yet recorded. Whoever owns it
// flushes it before it goes (its samples are lost otherwise).
class SampleBatch {
 public:
  static constexpr std::size_t kSampleBatch = 32;

  SampleBatch() = default;
  SampleBatch(const SampleBatch&) = delete;
  SampleBatch& operator=(const SampleBatch&) = delete;

  // Keeps a sample for `state`; records what the batch held first if it is full or holds
  // another key's samples.
  void add(EstimateState& state, RunSample sample) {
    if (state_ != &state || size_ == kSampleBatch) flush();
    state_ = &state;
    samples_[size_++] = sample;
  }
  // Records what the batch holds (nothing if empty).
  void flush() {
    if (size_ == 0) return;
    state_->record(std::span<const RunSample>{samples_.data(), size_});
    size_ = 0;
  }

 private:
  EstimateState* state_ = nullptr;
  std::size_t size_ = 0;
  std::array<RunSample, kSampleBatch> samples_{};
};

}  // namespace sandglass::detail

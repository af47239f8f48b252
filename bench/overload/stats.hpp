// stats.hpp — the figures of one (policy, load) point, computed from its job records, and the
// recovery times of a spike run.
//
//   offered_per_s      arrivals ÷ the point's length
//   goodput_per_s      on-time completions during the point's length ÷ that length (the
//                      counts below cover every arrival, also those that end after it)
//   goodput_ratio      goodput ÷ min(offered, capacity)
//   wasted_work_ratio  worker time on jobs that did not complete in time ÷ all worker time
//   admitted_then_dropped  admitted jobs that then left the queue without running (expired,
//                      too late to start, or shed by a higher class), and its ratio to admitted
//   latency_*          of on-time completions, from the scheduled arrival
//   rejection_latency  from handing the job over to learning that it was rejected
//
// Thread safety: value types and pure functions.
#pragma once

#include "recorder.hpp"
#include "schedule.hpp"

#include <sandglass/reason.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sandglass::bench {

struct PointResult {
  std::string policy;
  double load = 0;  // offered load as a multiple of capacity
  double offered_per_s = 0;
  double goodput_per_s = 0;
  double goodput_ratio = 0;
  std::uint64_t admitted = 0;  // passed admission (shed jobs included)
  std::array<std::uint64_t, kReasonCount> rejected{};  // by reason (shed included)
  std::uint64_t expired_in_queue = 0;
  std::uint64_t cancelled_while_running = 0;
  std::uint64_t completed_late = 0;
  std::uint64_t admitted_then_dropped = 0;
  double admitted_then_dropped_ratio = 0;
  double wasted_work_ratio = 0;
  std::optional<double> latency_p50_ms, latency_p99_ms, latency_p999_ms;
  // The same latencies as shares of each job's own budget (0.3: 30 % of it).
  std::optional<double> latency_share_p50, latency_share_p99;
  std::optional<double> rejection_latency_p99_us;
  std::size_t peak_queue_depth = 0;
  double peak_rss_mib = 0;

  // Diagnostics: not part of the per-point JSON fields.
  std::uint64_t arrivals = 0;
  std::uint64_t on_time = 0;
  std::uint64_t failed = 0;
  std::uint64_t abandoned = 0;       // expired_in_queue only because the run ended
  std::uint64_t too_late_to_start = 0;  // of expired_in_queue: dropped as unable to finish
  double utilization = 0;            // worker busy time ÷ (workers × length)
  double generator_lag_p99_us = 0;   // how late the generator submitted
  bool consistent = true;            // every arrival has exactly one fate

  std::uint64_t rejected_total() const noexcept;
};

struct PointInput {
  std::string policy;
  double load = 0;
  Duration length{};       // of the schedule
  double capacity_per_s = 0;
  std::size_t peak_queue_depth = 0;
  std::size_t peak_rss_bytes = 0;
  std::size_t abandoned = 0;
  std::size_t workers = 0;
};

PointResult summarize(const PointInput& in, const Recorder& rec);

// Nearest-rank percentile (q in [0, 1]) of unsorted values; nullopt when empty. Reorders.
std::optional<double> percentile(std::vector<double>& values, double q);

// Goodput over time in a spike run and how long it took to settle after each step.
struct SpikeResult {
  std::string policy;
  Duration window{};                       // the trailing average's width
  std::vector<double> phase_steady_per_s;  // mean goodput over each phase's second half
  // Per step (phase k to k+1): from the step until the trailing average of goodput (over the
  // window, but only over time after the step, and at least 50 ms of it) first comes within
  // 5 % of the target: phase k+1's steady value, or, when phase k+1 has the load of an
  // earlier phase, that phase's steady value (recovery to the state before the spike).
  std::vector<std::optional<Duration>> recovery;
  std::vector<double> targets_per_s;
  // The time series: 10 ms bin centre (s from the start) and goodput (jobs/s), a centred
  // 50 ms mean.
  std::vector<std::pair<double, double>> series;
};

SpikeResult analyze_spike(const std::string& policy, const Recorder& rec,
                          std::span<const Phase> phases);

}  // namespace sandglass::bench

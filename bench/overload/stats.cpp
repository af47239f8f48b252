#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

double seconds(Duration d) { return std::chrono::duration<double>{d}.count(); }
double millis(Duration d) { return std::chrono::duration<double, std::milli>{d}.count(); }
double micros(Duration d) { return std::chrono::duration<double, std::micro>{d}.count(); }

}  // namespace

std::uint64_t PointResult::rejected_total() const noexcept {
  return std::accumulate(rejected.begin(), rejected.end(), std::uint64_t{0});
}

std::optional<double> percentile(std::vector<double>& values, double q) {
  if (values.empty()) return std::nullopt;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  const std::size_t index = std::min(values.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index), values.end());
  return values[index];
}

PointResult summarize(const PointInput& in, const Recorder& rec) {
  PointResult r;
  r.policy = in.policy;
  r.load = in.load;
  r.arrivals = rec.size();
  r.peak_queue_depth = in.peak_queue_depth;
  r.peak_rss_mib = static_cast<double>(in.peak_rss_bytes) / (1024.0 * 1024.0);
  r.abandoned = in.abandoned;

  std::vector<double> latency_ms;
  std::vector<double> latency_share;
  std::vector<double> rejection_us;
  std::vector<double> lag_us;
  latency_ms.reserve(rec.size());
  lag_us.reserve(rec.size());
  Duration busy_all{};
  Duration busy_wasted{};
  std::uint64_t shed = 0;
  std::uint64_t on_time_in_window = 0;
  const std::span<const JobRecord> records = rec.records();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const JobRecord& j = records[i];
    lag_us.push_back(micros(j.submitted - rec.scheduled(i)));
    busy_all += j.busy;
    if (j.fate != Fate::on_time) busy_wasted += j.busy;
    switch (j.fate) {
      case Fate::pending:
        r.consistent = false;
        break;
      case Fate::on_time:
        ++r.on_time;
        if (j.ended - rec.start() < in.length) ++on_time_in_window;
        latency_ms.push_back(millis(j.ended - rec.scheduled(i)));
        latency_share.push_back(seconds(j.ended - rec.scheduled(i)) / seconds(rec.arrival(i).budget));
        break;
      case Fate::late:
        ++r.completed_late;
        break;
      case Fate::rejected:
        ++r.rejected[static_cast<std::size_t>(j.reason)];
        if (j.reason == Reason::shed) ++shed;
        rejection_us.push_back(micros(j.ended - j.submitted));
        break;
      case Fate::expired:
        ++r.expired_in_queue;
        if (j.reason == Reason::too_late_to_start) ++r.too_late_to_start;
        break;
      case Fate::cancelled:
        ++r.cancelled_while_running;
        break;
      case Fate::failed:
        ++r.failed;
        break;
    }
  }
  r.admitted = r.arrivals - r.rejected_total() + shed;
  // The run's end abandons what is still queued; that is the bench's doing, not a broken promise.
  r.admitted_then_dropped = r.expired_in_queue + shed -
                            std::min<std::uint64_t>(r.abandoned, r.expired_in_queue);
  r.admitted_then_dropped_ratio =
      r.admitted > 0 ? static_cast<double>(r.admitted_then_dropped) / static_cast<double>(r.admitted) : 0;
  const double length_s = seconds(in.length);
  r.offered_per_s = static_cast<double>(r.arrivals) / length_s;
  // Completions while arrivals were offered: the backlog worked off after the window (up to a
  // deadline later) would otherwise count on top of a full window's worth.
  r.goodput_per_s = static_cast<double>(on_time_in_window) / length_s;
  const double reachable = std::min(r.offered_per_s, in.capacity_per_s);
  r.goodput_ratio = reachable > 0 ? r.goodput_per_s / reachable : 0;
  if (in.workers > 0) r.utilization = seconds(busy_all) / (seconds(in.length) * static_cast<double>(in.workers));
  r.wasted_work_ratio = busy_all > Duration::zero() ? seconds(busy_wasted) / seconds(busy_all) : 0;
  r.latency_p50_ms = percentile(latency_ms, 0.50);
  r.latency_p99_ms = percentile(latency_ms, 0.99);
  r.latency_p999_ms = percentile(latency_ms, 0.999);
  r.latency_share_p50 = percentile(latency_share, 0.50);
  r.latency_share_p99 = percentile(latency_share, 0.99);
  r.rejection_latency_p99_us = percentile(rejection_us, 0.99);
  r.generator_lag_p99_us = percentile(lag_us, 0.99).value_or(0);
  const std::uint64_t fates = r.on_time + r.completed_late + r.rejected_total() - shed +
                              r.expired_in_queue + r.cancelled_while_running + r.failed;
  if (fates != r.arrivals) r.consistent = false;
  return r;
}

SpikeResult analyze_spike(const std::string& policy, const Recorder& rec,
                          std::span<const Phase> phases) {
  constexpr Duration kBin = 10ms;
  constexpr std::size_t kMinBins = 5;
  SpikeResult s;
  s.policy = policy;
  const Duration total = schedule_length(phases);
  s.window = std::clamp<Duration>(total / 30, 100ms, 500ms);
  const std::size_t bins = static_cast<std::size_t>(total / kBin);
  std::vector<double> on_time(bins, 0.0);
  for (const JobRecord& j : rec.records()) {
    if (j.fate != Fate::on_time) continue;
    const auto bin = static_cast<std::size_t>((j.ended - rec.start()) / kBin);
    if (bin < bins) on_time[bin] += 1;
  }
  const double per_s = 1.0 / seconds(kBin);
  for (std::size_t b = 0; b < bins; ++b) {
    // A centred 50 ms mean: 10 ms bins alone are too noisy to read.
    const std::size_t lo = b >= 2 ? b - 2 : 0;
    const std::size_t hi = std::min(bins - 1, b + 2);
    double sum = 0;
    for (std::size_t k = lo; k <= hi; ++k) sum += on_time[k];
    s.series.emplace_back(seconds(kBin) * (static_cast<double>(b) + 0.5),
                          sum * per_s / static_cast<double>(hi - lo + 1));
  }
  const auto window_bins = static_cast<std::size_t>(s.window / kBin);
  // The mean over bins (end_bin - window, end_bin], none before `floor` (the step).
  auto trailing = [&](std::size_t end_bin, std::size_t floor) {
    const std::size_t first =
        std::max(floor, end_bin + 1 >= window_bins ? end_bin + 1 - window_bins : 0);
    double sum = 0;
    for (std::size_t b = first; b <= end_bin; ++b) sum += on_time[b];
    return sum * per_s / static_cast<double>(end_bin + 1 - first);
  };

  std::vector<std::size_t> phase_start;
  Duration at{};
  for (const Phase& p : phases) {
    phase_start.push_back(static_cast<std::size_t>(at / kBin));
    at += p.length;
  }
  phase_start.push_back(bins);
  for (std::size_t k = 0; k < phases.size(); ++k) {
    const std::size_t mid = (phase_start[k] + phase_start[k + 1]) / 2;
    double sum = 0;
    for (std::size_t b = mid; b < phase_start[k + 1]; ++b) sum += on_time[b];
    const std::size_t n = phase_start[k + 1] - mid;
    s.phase_steady_per_s.push_back(n > 0 ? sum * per_s / static_cast<double>(n) : 0);
  }
  for (std::size_t k = 0; k + 1 < phases.size(); ++k) {
    double target = s.phase_steady_per_s[k + 1];
    for (std::size_t e = 0; e <= k; ++e) {
      if (phases[e].rate_per_s == phases[k + 1].rate_per_s) {
        target = s.phase_steady_per_s[e];
        break;
      }
    }
    s.targets_per_s.push_back(target);
    std::optional<Duration> recovery;
    // At least kMinBins after the step, so one noisy bin does not decide.
    for (std::size_t b = phase_start[k + 1] + kMinBins - 1; b < phase_start[k + 2]; ++b) {
      if (std::abs(trailing(b, phase_start[k + 1]) - target) <= 0.05 * target) {
        recovery = kBin * static_cast<Duration::rep>(b + 1 - phase_start[k + 1]);
        break;
      }
    }
    s.recovery.push_back(recovery);
  }
  return s;
}

}  // namespace sandglass::bench

#include "runtime/prediction_error.hpp"

#include <algorithm>
#include <bit>

namespace sandglass::detail {

std::size_t TailSketch::bucket_of(Duration d) noexcept {
  const std::int64_t ns = std::chrono::nanoseconds{d}.count();
  if (ns <= 0) return 0;
  const auto v = static_cast<std::uint64_t>(std::min<std::int64_t>(ns, std::int64_t{1} << 61));
  const int e = std::bit_width(v) - 1;  // 0..61
  const std::uint64_t sub = e >= 2 ? (v >> (e - 2)) & 3 : (v << (2 - e)) & 3;
  return 1 + 4 * static_cast<std::size_t>(e) + static_cast<std::size_t>(sub);
}

Duration TailSketch::end_of(std::size_t bucket) noexcept {
  if (bucket == 0) return Duration::zero();
  const std::size_t e = (bucket - 1) / 4;
  const std::uint64_t quarters = 5 + (bucket - 1) % 4;  // the bucket ends at quarters / 4 × 2^e
  const std::uint64_t end = e >= 2 ? quarters << (e - 2) : (quarters << e) >> 2;
  return std::chrono::nanoseconds{static_cast<std::int64_t>(end)};
}

void TailSketch::halve(TimePoint now) noexcept {
  // One halving per kMaxAge that passed (a long pause forgets all), at least one.
  const std::int64_t periods = std::max<std::int64_t>((now - halved_at_) / kMaxAge, 1);
  const int shift = static_cast<int>(std::min<std::int64_t>(periods, 32));
  total_ = 0;
  for (std::uint32_t& c : counts_) {
    c = shift >= 32 ? 0 : c >> shift;
    total_ += c;
  }
  since_halved_ = 0;
  halved_at_ = now;
}

void TailSketch::add(Duration d, TimePoint now) noexcept {
  if (!started_) {
    started_ = true;
    halved_at_ = now;
  }
  if (since_halved_ >= kWindow || now - halved_at_ >= kMaxAge) halve(now);
  const std::size_t b = bucket_of(d);
  ++counts_[b];
  highest_ = std::max(highest_, b);
  ++total_;
  ++since_halved_;
}

Duration TailSketch::quantile(double q) const noexcept {
  if (total_ == 0) return Duration::zero();
  const double allowed_above = (1.0 - q) * static_cast<double>(total_);
  std::uint64_t above = 0;
  for (std::size_t b = highest_ + 1; b-- > 0;) {
    above += counts_[b];
    if (static_cast<double>(above) > allowed_above) return end_of(b);
  }
  return Duration::zero();
}

void PredictionError::on_start(TimePoint predicted, TimePoint now) noexcept {
  if (predicted == TimePoint{}) return;
  starts_.add(saturating_sub(now, predicted), now);
  if (++unpublished_ >= kPublishEvery) publish();
}

void PredictionError::on_finish(TimePoint predicted_start, TimePoint started_at, Duration predicted_run,
                                Duration actual_run, TimePoint ended_at) noexcept {
  if (predicted_run <= Duration::zero()) return;
  const Duration run_error = actual_run - predicted_run;
  runs_.add(run_error, ended_at);
  if (predicted_start != TimePoint{}) {
    finishes_.add(saturating_sub(started_at, predicted_start) + run_error, ended_at);
  }
  if (++unpublished_ >= kPublishEvery) publish();
}

void PredictionError::on_drop(TimePoint predicted, TimePoint now) noexcept {
  if (predicted == TimePoint{}) return;
  const Duration late = saturating_sub(now, predicted);
  starts_.add(late, now);
  finishes_.add(late, now);
  if (++unpublished_ >= kPublishEvery) publish();
}

void PredictionError::publish() noexcept {
  unpublished_ = 0;
  const Duration start = starts_.quantile(kQuantile);
  const Duration run = runs_.quantile(kQuantile);
  auto set = [](std::atomic<Duration::rep>& figure, Duration d) {
    if (figure.load(std::memory_order_relaxed) != d.count()) figure.store(d.count(), std::memory_order_relaxed);
  };
  set(start_tail_ns_, start);
  set(run_tail_ns_, run);
  set(margin_ns_, finishes_.quantile(kMarginQuantile));
}

}  // namespace sandglass::detail

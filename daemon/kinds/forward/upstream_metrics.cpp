#include "daemon/kinds/forward/upstream_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <mutex>
#include <utility>

namespace sandglass::daemon {
namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

prometheus::Histogram::BucketBoundaries budget_buckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

}  // namespace

struct UpstreamMetrics::Families {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& attempts =
      prometheus::BuildCounter().Name("sandglass_upstream_attempts_total")
          .Help("Attempts sent to an upstream by the forward kind, by how they ended").Register(registry);
  prometheus::Family<prometheus::Histogram>& budget =
      prometheus::BuildHistogram().Name("sandglass_upstream_budget_seconds")
          .Help("The job's remaining budget right before and right after each attempt").Register(registry);
  prometheus::Family<prometheus::Counter>& calls =
      prometheus::BuildCounter().Name("sandglass_upstream_calls_total")
          .Help("Forward jobs by how their retry loop ended").Register(registry);
  prometheus::Family<prometheus::Counter>& retries =
      prometheus::BuildCounter().Name("sandglass_upstream_retries_total")
          .Help("Attempts after the first, in all").Register(registry);
  prometheus::Family<prometheus::Gauge>& breaker =
      prometheus::BuildGauge().Name("sandglass_upstream_breaker_state")
          .Help("The upstream's circuit breaker: 0 closed, 1 half open, 2 open").Register(registry);
  std::mutex mu;
  std::vector<std::pair<prometheus::Gauge*, const CircuitBreaker*>> breakers;  // guarded by mu
};

UpstreamMetrics::UpstreamMetrics() : families_{std::make_unique<Families>()} {}
UpstreamMetrics::~UpstreamMetrics() = default;

void UpstreamMetrics::attempt(const std::string& upstream, std::string_view result,
                              Duration remaining_before, Duration remaining_after) {
  Families& f = *families_;
  f.attempts.Add({{"upstream", upstream}, {"result", std::string{result}}}).Increment();
  f.budget.Add({{"upstream", upstream}, {"when", "before"}}, budget_buckets()).Observe(seconds(remaining_before));
  f.budget.Add({{"upstream", upstream}, {"when", "after"}}, budget_buckets()).Observe(seconds(remaining_after));
}

void UpstreamMetrics::call(const std::string& upstream, RetryReason reason, int attempts) {
  Families& f = *families_;
  f.calls.Add({{"upstream", upstream}, {"reason", std::string{to_string(reason)}}}).Increment();
  auto& retries = f.retries.Add({{"upstream", upstream}});
  if (attempts > 1) retries.Increment(attempts - 1);
}

void UpstreamMetrics::watch_breaker(const std::string& upstream, const CircuitBreaker& breaker) {
  std::lock_guard lock{families_->mu};
  families_->breakers.emplace_back(&families_->breaker.Add({{"upstream", upstream}}), &breaker);
}

std::string UpstreamMetrics::render() {
  Families& f = *families_;
  {
    std::lock_guard lock{f.mu};
    for (auto& [gauge, breaker] : f.breakers) {
      const BreakerState s = breaker->state();
      gauge->Set(s == BreakerState::closed ? 0 : s == BreakerState::half_open ? 1 : 2);
    }
  }
  return prometheus::TextSerializer{}.Serialize(f.registry.Collect());
}

}  // namespace sandglass::daemon

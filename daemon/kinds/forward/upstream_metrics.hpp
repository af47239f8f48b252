// upstream_metrics.hpp (private) — `UpstreamMetrics`, the forward kind's series per upstream
// (labels: upstream, from the config's bounded set; result; reason; when):
//
//   sandglass_upstream_attempts_total{upstream,result}   answered, connect_error, cancelled,
//                                                        timeout_{connect,request,response}
//   sandglass_upstream_budget_seconds{upstream,when}     remaining job budget before/after
//                                                        each attempt (histogram)
//   sandglass_upstream_calls_total{upstream,reason}      how each job's retry loop ended
//                                                        (succeeded, retry_skipped_budget, ...)
//   sandglass_upstream_retries_total{upstream}           attempts after the first
//   sandglass_upstream_breaker_state{upstream}           0 closed, 1 half open, 2 open
//
// Thread safety: all member functions may be called concurrently.
#pragma once

#include <sandglass/circuit_breaker.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/retry_policy.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

class UpstreamMetrics {
 public:
  UpstreamMetrics();
  ~UpstreamMetrics();

  void attempt(const std::string& upstream, std::string_view result, Duration remaining_before,
               Duration remaining_after);
  void call(const std::string& upstream, RetryReason reason, int attempts);
  // Breaker states are read at render time from these.
  void watch_breaker(const std::string& upstream, const CircuitBreaker& breaker);

  std::string render();

 private:
  struct Families;
  std::unique_ptr<Families> families_;
};

}  // namespace sandglass::daemon

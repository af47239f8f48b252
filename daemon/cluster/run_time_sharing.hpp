// run_time_sharing.hpp (private) — when a node's exchange announces every outcome it writes, so
// that the other nodes learn its run times (migrations/functions.sql, "Announced outcomes"): at
// most once per kShareRunTimes. An isolated outcome is therefore always announced; under a high
// rate, one exchange per interval is (a sample), and between them only the outcomes someone waits
// for. Each announcing commit takes PostgreSQL's one NOTIFY lock, which serializes the commits of
// all nodes (PostgreSQL serialises NOTIFYing commits).
//
//   RunTimeSharing sharing;
//   const bool share = !outcomes.empty() && sharing.due(asked);   // sandglass_finish_claim's
// p_share
//   ... the statement succeeded ...
//   if (share) sharing.shared(asked);
//
// The claims bench (bench/overload/cluster_bench.cpp) shares by this rule too, as a node would.
//
// Thread safety: distinct objects: safe; shared objects: unsafe (a node's claimer owns one).
#pragma once

#include <sandglass/deadline.hpp>

#include <chrono>
#include <optional>

namespace sandglass::daemon::cluster {

inline constexpr std::chrono::milliseconds kShareRunTimes{50};

class RunTimeSharing {
 public:
  // Whether an exchange sent at `now` with outcomes announces them all: none was shared yet,
  // or the last one was at least kShareRunTimes before `now`.
  bool due(TimePoint now) const noexcept { return !last_ || now - *last_ >= kShareRunTimes; }
  // An exchange sent at `at` that shared its outcomes succeeded (one that failed shares again).
  void shared(TimePoint at) noexcept { last_ = at; }

 private:
  std::optional<TimePoint> last_;
};

}  // namespace sandglass::daemon::cluster

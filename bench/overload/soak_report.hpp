// soak_report.hpp — the figures of a soak run (soak.hpp) and their table and JSON.
//
// Thread safety: value types and free functions; call from one thread.
#pragma once

#include "options.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace sandglass::bench {

// Jobs by terminal state (completed, failed, rejected, expired, cancelled) and submissions.
struct JobCounts {
  std::uint64_t submitted = 0;
  std::map<std::string, std::uint64_t> by_state;
  std::uint64_t state(const std::string& name) const {
    const auto it = by_state.find(name);
    return it == by_state.end() ? 0 : it->second;
  }
};

struct SoakFigures {
  std::string daemon;  // "started pid N" or "attached pid N"
  double capacity_per_s = 0;
  double load = 0;
  double seconds = 0;
  std::uint64_t arrivals = 0;
  double offered_per_s = 0;
  std::uint64_t on_time = 0;
  double goodput = 0;        // on-time completions ÷ arrivals
  double goodput_ratio = 0;  // on-time completions per second ÷ min(offered, capacity)
  std::uint64_t rejected = 0;
  std::optional<double> rejection_p50_us, rejection_p99_us;  // answer of a refusal, client side
  std::uint64_t completed_late = 0, expired = 0, cancelled = 0, failed = 0;
  std::size_t transport_errors = 0, no_free_connection = 0;
  std::string first_error;  // of the client, if any
  std::optional<double> latency_p50_ms, latency_p99_ms;  // on-time completions
  double rss_start_mib = 0, rss_peak_mib = 0, rss_end_mib = 0, rss_bound_mib = 0;
  std::size_t fds_start = 0, fds_peak = 0, fds_end = 0;
  std::size_t samples = 0;  // RSS/fd samples after the warm-up
  // Every sample from the start of the soak: seconds since its start, RSS in MiB, fds.
  std::vector<std::tuple<double, double, std::size_t>> series;
  bool consistent = true;   // every arrival has one fate
  bool rss_ok = false, fds_ok = false;
};

struct SigtermFigures {
  bool ran = false;
  double phase_s = 0, signal_after_s = 0;
  std::uint64_t arrivals = 0;
  std::optional<int> exit_code;
  double exit_after_s = 0;  // from SIGTERM until the process was reaped
  double exit_bound_s = 0;
  JobCounts client;        // answers by state
  JobCounts daemon;        // drain summary minus /metrics before the phase
  std::size_t transport_errors = 0;  // requests the daemon never took (refused, closed)
  std::size_t other_answers = 0;     // answers without a job state
  std::uint64_t refusals_unanswered = 0;  // counted rejections the client saw no answer for
  std::string problem;     // empty when the phase held
};

struct SoakReport {
  const Options* options = nullptr;
  std::string load_at_start, load_at_end;
  SoakFigures soak;
  SigtermFigures sigterm;
  bool ok() const noexcept {
    return soak.consistent && soak.rss_ok && soak.fds_ok && (!sigterm.ran || sigterm.problem.empty());
  }
};

void print_soak(std::FILE* out, const SoakReport& r);
// False with `error` set when the file cannot be written.
bool write_soak_json(const std::string& path, const SoakReport& r, std::string& error);

}  // namespace sandglass::bench

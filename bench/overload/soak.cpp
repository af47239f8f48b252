#include "soak.hpp"

#include "daemon_child.hpp"
#include "http_load.hpp"
#include "process_sampler.hpp"
#include "recorder.hpp"
#include "report.hpp"
#include "schedule.hpp"
#include "soak_report.hpp"
#include "stats.hpp"

#include <fmt/core.h>

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

constexpr double kMiB = 1024.0 * 1024.0;
// How long the started daemon waits for answers to be taken after its drain (its default
// server.write_timeout_ms), and the margin on top of the exit bound.
constexpr Duration kAnswersGrace = 10s;
constexpr Duration kExitMargin = 5s;
constexpr const char* kStates[] = {"completed", "failed", "rejected", "expired", "cancelled"};

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// The value of `name="..."` in a label set, or "".
std::string label(const std::string& line, const std::string& name) {
  const std::string key = name + "=\"";
  const auto at = line.find(key);
  if (at == std::string::npos) return {};
  const auto end = line.find('"', at + key.size());
  return line.substr(at + key.size(), end - at - key.size());
}

double sample_value(const std::string& line) {
  const auto space = line.find_last_of(' ');
  double v = 0;
  std::from_chars(line.data() + space + 1, line.data() + line.size(), v);
  return v;
}

// sandglass_jobs_total summed by its state label; sandglass_jobs_submitted_total summed.
JobCounts counts_from_metrics(const std::string& text) {
  JobCounts c;
  std::istringstream lines{text};
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("sandglass_jobs_total{")) {
      c.by_state[label(line, "state")] += static_cast<std::uint64_t>(sample_value(line));
    } else if (line.starts_with("sandglass_jobs_submitted_total{")) {
      c.submitted += static_cast<std::uint64_t>(sample_value(line));
    }
  }
  return c;
}

// The drain summary sandglassd logs last: "stopped: submitted=5 completed=3 failed=0
// rejected=0 expired=0 cancelled=2 drained_in_time=true".
std::optional<JobCounts> counts_from_drain_line(const std::string& log) {
  const auto at = log.rfind("stopped: submitted=");
  if (at == std::string::npos) return std::nullopt;
  std::istringstream fields{log.substr(at + 9, log.find('\n', at) - at - 9)};
  JobCounts c;
  for (std::string field; fields >> field;) {
    const auto eq = field.find('=');
    if (eq == std::string::npos || field.starts_with("drained_in_time")) continue;
    const std::string key = field.substr(0, eq);
    const std::uint64_t value = std::stoull(field.substr(eq + 1));
    if (key == "submitted") {
      c.submitted = value;
    } else {
      c.by_state[key] = value;
    }
  }
  return c;
}

// The descriptor count once it stops changing (two equal readings 500 ms apart), at most
// `timeout`; or, with `at_most`, as soon as it is no more than that.
std::size_t settled_fds(int pid, Duration timeout, std::optional<std::size_t> at_most = {}) {
  const TimePoint until = Clock::now() + timeout;
  std::size_t last = open_fd_count(pid).value_or(0);
  while (Clock::now() < until) {
    if (at_most && last <= *at_most) return last;
    std::this_thread::sleep_for(at_most ? 50ms : 500ms);  // observing another process
    const std::size_t now = open_fd_count(pid).value_or(0);
    if (!at_most && now == last) return now;
    last = now;
  }
  return last;
}

void fill_memory(SoakFigures& f, const std::vector<ProcessSample>& samples, TimePoint from,
                 TimePoint to, double bound_mib) {
  f.rss_bound_mib = bound_mib;
  std::size_t peak = 0, start = 0, end = 0;
  for (const ProcessSample& s : samples) {
    if (s.at < from || s.at > to) continue;
    if (f.samples++ == 0) start = s.rss_bytes;
    peak = std::max(peak, s.rss_bytes);
    end = s.rss_bytes;
  }
  f.rss_start_mib = static_cast<double>(start) / kMiB;
  f.rss_peak_mib = static_cast<double>(peak) / kMiB;
  f.rss_end_mib = static_cast<double>(end) / kMiB;
  f.rss_ok = f.samples >= 2 && f.rss_peak_mib <= f.rss_start_mib + bound_mib &&
             f.rss_end_mib <= f.rss_start_mib + bound_mib;
}

void fill_outcomes(SoakFigures& f, const Options& o, double capacity, const Recorder& rec,
                   const HttpRunStats& s) {
  const PointResult r = summarize({.policy = "sandglassd", .load = o.loads.front(),
                                   .length = o.soak, .capacity_per_s = capacity,
                                   .workers = o.workers},
                                  rec);
  f.capacity_per_s = capacity;
  f.load = o.loads.front();
  f.seconds = seconds(o.soak);
  f.arrivals = r.arrivals;
  f.offered_per_s = r.offered_per_s;
  f.on_time = r.on_time;
  f.goodput = r.arrivals ? static_cast<double>(r.on_time) / static_cast<double>(r.arrivals) : 0;
  f.goodput_ratio = r.goodput_ratio;
  f.rejected = r.rejected_total();
  f.completed_late = r.completed_late;
  f.expired = r.expired_in_queue;
  f.cancelled = r.cancelled_while_running;
  f.failed = r.failed;
  f.latency_p50_ms = r.latency_p50_ms;
  f.latency_p99_ms = r.latency_p99_ms;
  f.consistent = r.consistent;
  f.transport_errors = s.transport_errors;
  f.no_free_connection = s.no_free_connection;
  f.first_error = s.first_error;
  std::vector<double> refusal_us;
  for (const JobRecord& j : rec.records()) {
    if (j.fate == Fate::rejected) {
      refusal_us.push_back(std::chrono::duration<double, std::micro>{j.ended - j.submitted}.count());
    }
  }
  f.rejection_p50_us = percentile(refusal_us, 0.5);
  f.rejection_p99_us = percentile(refusal_us, 0.99);
}

// Overload for --sigterm-phase with SIGTERM at its middle; the exactly-one-answer accounting.
SigtermFigures sigterm_phase(const Options& o, DaemonChild& child, const HttpTarget& target,
                             double rate_per_s) {
  SigtermFigures f;
  f.ran = true;
  f.phase_s = seconds(o.sigterm_phase);
  f.signal_after_s = f.phase_s / 2;
  const Duration bound = o.drain_timeout + kAnswersGrace + kExitMargin;
  f.exit_bound_s = seconds(bound);
  const std::optional<std::string> metrics = http_get(target, "/metrics");
  if (!metrics) {
    f.problem = "GET /metrics failed before the SIGTERM phase";
    return f;
  }
  const JobCounts before = counts_from_metrics(*metrics);

  const Phase phase{.rate_per_s = rate_per_s, .length = o.sigterm_phase};
  const std::vector<Arrival> arrivals = make_schedule({&phase, 1}, o.service, o.deadline, o.seed * 31 + 7);
  f.arrivals = arrivals.size();
  Recorder rec{Clock::now() + 5ms, arrivals};
  const TimePoint signal_at = rec.start() + o.sigterm_phase / 2;
  std::optional<int> code;
  Duration exit_after{};
  std::thread killer{[&] {
    std::this_thread::sleep_until(signal_at);
    const TimePoint sent = Clock::now();
    child.signal(SIGTERM);
    code = child.wait_exit(bound);
    exit_after = Clock::now() - sent;
  }};
  const HttpRunStats s = run_http_arrivals(target, {.body = o.body, .max_connections = o.connections}, rec);
  killer.join();
  for (const char* state : kStates) f.client.by_state[state] = 0;
  f.exit_code = code;
  f.exit_after_s = seconds(exit_after);
  f.transport_errors = s.transport_errors + s.no_free_connection;
  for (const auto& [state, n] : s.answers_by_state) {
    if (std::find(std::begin(kStates), std::end(kStates), state) == std::end(kStates)) {
      f.other_answers += n;
    } else {
      f.client.by_state[state] += n;
      f.client.submitted += n;
    }
  }

  if (!code) {
    f.problem = fmt::format("sandglassd still ran {:.1f} s after SIGTERM", f.exit_bound_s);
    child.signal(SIGKILL);
    child.wait_exit(10s);
    return f;
  }
  const std::optional<JobCounts> after = counts_from_drain_line(child.log());
  if (!after) {
    f.problem = "no drain summary (\"stopped: ...\") in the daemon's log";
    return f;
  }
  f.daemon.submitted = after->submitted - before.submitted;
  for (const char* state : kStates) f.daemon.by_state[state] = after->state(state) - before.state(state);
  if (*code != 0) {
    f.problem = fmt::format("exit code {}", *code);
  } else if (f.other_answers != 0) {
    f.problem = fmt::format("{} answers without a job state", f.other_answers);
  } else {
    // Every job the daemon counted, refusals included, got exactly one answer: the drain
    // answers every request it read before it stops the server.
    bool all_match = f.daemon.submitted == f.client.submitted;
    for (const char* state : kStates) {
      all_match = all_match && f.client.state(state) == f.daemon.state(state);
    }
    const std::uint64_t client_rejected = f.client.state("rejected");
    const std::uint64_t daemon_rejected = f.daemon.state("rejected");
    f.refusals_unanswered = daemon_rejected >= client_rejected ? daemon_rejected - client_rejected : 0;
    if (!all_match) f.problem = "the answers the client got differ from the jobs the daemon counted";
  }
  return f;
}

}  // namespace

int run_soak(const Options& o) {
  SoakReport report{.options = &o, .load_at_start = load_average()};
  std::unique_ptr<DaemonChild> child;
  HttpTarget target;
  int pid = -1;
  try {
    if (!o.sandglassd_path.empty()) {
      child = std::make_unique<DaemonChild>(
          o.sandglassd_path,
          std::vector<std::string>{"--workers", std::to_string(o.workers), "--capacity",
                                   std::to_string(o.capacity), "--drain-timeout-ms",
                                   std::to_string(o.drain_timeout.count()), "--log-level", "info"});
      target.port = child->port();
      pid = child->pid();
      report.soak.daemon = fmt::format("started {} (pid {}, port {})", o.sandglassd_path, pid, target.port);
    } else {
      const auto t = parse_http_target(o.target);
      if (!t) {
        std::fprintf(stderr, "sandglass-overload: --target: expected http://127.0.0.1:PORT, got \"%s\"\n", o.target.c_str());
        return 2;
      }
      target = *t;
      const auto found = find_listener_pid(target.port);
      if (!found) {
        std::fprintf(stderr, "sandglass-overload: no process of this user listens on %s (the soak needs its /proc entry)\n", o.target.c_str());
        return 1;
      }
      pid = *found;
      report.soak.daemon = fmt::format("attached to {} (pid {})", o.target, pid);
    }
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "sandglass-overload: %s\n", e.what());
    return 1;
  }
  std::printf("# soak: %s\n", report.soak.daemon.c_str());
  std::fflush(stdout);

  ProcessSampler sampler{pid};
  const std::size_t closed_loop = std::max<std::size_t>(16, 4 * o.workers);
  const double capacity =
      measure_http_capacity(target, o.body, o.service, closed_loop, o.capacity_duration, o.seed);
  if (capacity <= 0) {
    std::fprintf(stderr, "sandglass-overload: no job completed against 127.0.0.1:%u\n", target.port);
    return 1;
  }
  report.soak.fds_start = settled_fds(pid, 10s);
  std::printf("# capacity %.0f jobs/s; offering %.0fx = %.0f/s for %s; idle fds %zu\n", capacity,
              o.loads.front(), o.loads.front() * capacity, format_duration(o.soak).c_str(),
              report.soak.fds_start);
  std::fflush(stdout);

  const Phase phase{.rate_per_s = o.loads.front() * capacity, .length = o.soak};
  const std::vector<Arrival> arrivals = make_schedule({&phase, 1}, o.service, o.deadline, o.seed);
  {
    Recorder rec{Clock::now() + 5ms, arrivals};
    const HttpRunStats s = run_http_arrivals(target, {.body = o.body, .max_connections = o.connections}, rec);
    fill_outcomes(report.soak, o, capacity, rec, s);
    fill_memory(report.soak, sampler.samples(), rec.start() + o.soak_warm_up, rec.start() + o.soak,
                o.max_rss_growth_mib);
    for (const ProcessSample& x : sampler.samples()) {
      if (x.at < rec.start() || x.at > rec.start() + o.soak) continue;
      report.soak.fds_peak = std::max(report.soak.fds_peak, x.fds);
      report.soak.series.emplace_back(seconds(x.at - rec.start()),
                                      static_cast<double>(x.rss_bytes) / kMiB, x.fds);
    }
  }
  // The client's connections are closed; the daemon should be back at its idle count.
  report.soak.fds_end = settled_fds(pid, 10s, report.soak.fds_start);
  report.soak.fds_ok = report.soak.fds_end <= report.soak.fds_start;

  if (child && o.sigterm) {
    report.sigterm = sigterm_phase(o, *child, target, o.loads.front() * capacity);
  }
  report.load_at_end = load_average();
  print_soak(stdout, report);
  bool ok = report.ok();
  if (!o.json_path.empty()) {
    std::string error;
    if (!write_soak_json(o.json_path, report, error)) {
      std::fprintf(stderr, "sandglass-overload: --json: %s\n", error.c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace sandglass::bench

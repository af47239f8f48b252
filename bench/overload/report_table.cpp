// The table on stdout, and what the report says about the machine.
#include "report.hpp"

#include <sys/utsname.h>

#include <fmt/core.h>

#include <fstream>
#include <thread>

namespace sandglass::bench {
namespace {

std::string opt(const std::optional<double>& v, int precision) {
  return v ? fmt::format("{:.{}f}", *v, precision) : std::string{"-"};
}

// A share of the budget as a percentage (b%p50, b%p99).
std::optional<double> share_percent(const std::optional<double>& share) {
  return share ? std::optional<double>{*share * 100} : std::nullopt;
}

std::uint64_t count(const PointResult& r, Reason reason) {
  return r.rejected[static_cast<std::size_t>(reason)];
}

}  // namespace

Machine describe_machine() {
  Machine m;
  m.cores = std::thread::hardware_concurrency();
  std::ifstream cpuinfo{"/proc/cpuinfo"};
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) m.cpu = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  utsname u{};
  if (uname(&u) == 0) m.kernel = u.release;
  return m;
}

std::string load_average() {
  std::ifstream in{"/proc/loadavg"};
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

void print_settings(std::FILE* out, const RunInfo& info) {
  const Options& o = *info.options;
  fmt::print(out, "# {}\n", o.command_line);
  fmt::print(out, "# machine: {} cores, {}, Linux {}; load average at start {}\n",
             info.machine.cores, info.machine.cpu, info.machine.kernel, info.load_at_start);
  fmt::print(out,
             "# mode: {}; workers {}, queue capacity {}, body {}, service {}, deadline {}, "
             "{} per point, seed {}\n",
             info.mode, o.workers, o.capacity, to_string(o.body), o.service.describe(),
             o.deadline.describe(), format_duration(o.duration), o.seed);
  fmt::print(out, "# sandglass: estimate_quantile {}, estimate_max_age {}, drop_if_cannot_finish {}, hints {}\n",
             o.estimate_quantile, format_duration(o.estimate_max_age), o.drop_if_cannot_finish,
             o.hints.describe());
  if (o.stall.on()) {
    fmt::print(out, "# stall: the process is stopped for {} once every {} while each point runs\n",
               format_duration(o.stall.length), format_duration(o.stall.period));
  }
  fmt::print(out, "# capacity: {:.0f} jobs/s ({})\n", info.capacity_per_s, info.capacity_note);
  std::fflush(out);
}

void print_table_header(std::FILE* out) {
  fmt::print(out,
             "\n{:<12} {:>5} {:>9} {:>9} {:>6} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>7} {:>7} "
             "{:>6} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>6} {:>6}\n",
             "policy", "load", "offered/s", "goodput/s", "ratio", "admitted", "rej:full",
             "rej:impl", "shed", "other", "expired", "cancel", "late", "wasted", "adm>drop", "p50ms",
             "p99ms", "p999ms", "b%p50", "b%p99", "rej99us", "depth", "rssMiB");
  std::fflush(out);
}

void print_table_row(std::FILE* out, const PointResult& r) {
  const std::uint64_t other = r.rejected_total() - count(r, Reason::queue_full) -
                              count(r, Reason::deadline_implausible) - count(r, Reason::shed);
  fmt::print(out,
             "{:<12} {:>5} {:>9.0f} {:>9.0f} {:>6.3f} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>7} "
             "{:>7} {:>6.3f} {:>7.4f} {:>7} {:>7} {:>7} {:>6} {:>6} {:>8} {:>6} {:>6.0f}{}\n",
             r.policy, fmt::format("{:g}", r.load), r.offered_per_s, r.goodput_per_s,
             r.goodput_ratio, r.admitted, count(r, Reason::queue_full),
             count(r, Reason::deadline_implausible), count(r, Reason::shed), other,
             r.expired_in_queue, r.cancelled_while_running, r.completed_late,
             r.wasted_work_ratio, r.admitted_then_dropped_ratio, opt(r.latency_p50_ms, 2), opt(r.latency_p99_ms, 2),
             opt(r.latency_p999_ms, 2), opt(share_percent(r.latency_share_p50), 0),
             opt(share_percent(r.latency_share_p99), 0), opt(r.rejection_latency_p99_us, 1), r.peak_queue_depth,
             r.peak_rss_mib, r.consistent ? "" : "  (INCONSISTENT: jobs without a fate)");
  std::fflush(out);
}

void print_diagnostics(std::FILE* out, const PointResult& r) {
  fmt::print(out,
             "    arrivals {} on_time {} | generator lag p99 {:.0f}us | utilization {:.3f} | "
             "too_late_to_start {} | abandoned at end {} | failed {}\n",
             r.arrivals, r.on_time, r.generator_lag_p99_us, r.utilization, r.too_late_to_start,
             r.abandoned, r.failed);
  std::fflush(out);
}

void print_spike(std::FILE* out, std::span<const SpikeResult> spikes) {
  if (spikes.empty()) return;
  fmt::print(out, "\nspike 0.8x -> 1.4x -> 0.8x: steady goodput/s per phase (mean of each "
                  "phase's second half); recovery = time from the step until goodput (trailing "
                  "mean) is within 5% of its target\n");
  fmt::print(out, "{:<12} {:>9} {:>9} {:>9} {:>14} {:>14} {:>10}\n", "policy", "0.8x", "1.4x",
             "0.8x", "recover up ms", "recover down", "window ms");
  for (const SpikeResult& s : spikes) {
    auto rec = [](const std::optional<Duration>& d) {
      return d ? fmt::format("{:.0f}", std::chrono::duration<double, std::milli>{*d}.count())
               : std::string{"never"};
    };
    fmt::print(out, "{:<12} {:>9.0f} {:>9.0f} {:>9.0f} {:>14} {:>14} {:>10.0f}\n", s.policy,
               s.phase_steady_per_s.at(0), s.phase_steady_per_s.at(1),
               s.phase_steady_per_s.at(2), rec(s.recovery.at(0)), rec(s.recovery.at(1)),
               std::chrono::duration<double, std::milli>{s.window}.count());
  }
  std::fflush(out);
}

}  // namespace sandglass::bench

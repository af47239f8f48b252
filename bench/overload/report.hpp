// report.hpp — the bench's output: a table on stdout, a JSON file, gnuplot plots.
//
// JSON: one object per (policy, load) in "results", with exactly these fields:
//   policy, load, offered_per_s, goodput_per_s, goodput_ratio, admitted,
//   rejected {queue_full, deadline_implausible, shed, budget_too_small, shutting_down},
//   expired_in_queue, cancelled_while_running, completed_late, wasted_work_ratio,
//   latency_p50_ms, latency_p99_ms, latency_p999_ms, rejection_latency_p99_us,
//   peak_queue_depth, peak_rss_mib
// (a latency is null when there was nothing to measure); around them the command, the
// machine, the settings, the measured capacity, the spike results and diagnostics.
//
// Thread safety: free functions; call from one thread.
#pragma once

#include "options.hpp"
#include "stats.hpp"

#include <cstdio>
#include <span>
#include <string>

namespace sandglass::bench {

struct Machine {
  unsigned cores = 0;
  std::string cpu;     // model name from /proc/cpuinfo
  std::string kernel;  // uname -r
};
Machine describe_machine();
// The first three fields of /proc/loadavg: other work on the machine skews every figure.
std::string load_average();

// What the report says about the run besides the points.
struct RunInfo {
  const Options* options = nullptr;
  Machine machine;
  std::string mode;  // "in-process" or "http"
  double capacity_per_s = 0;
  std::string capacity_note;  // how it was measured
  std::string load_at_start;
  std::string load_at_end;    // set before the outputs are written
};

void print_settings(std::FILE* out, const RunInfo& info);
void print_table_header(std::FILE* out);
void print_table_row(std::FILE* out, const PointResult& r);
// Generator lag, worker utilization, drops that could not finish, jobs abandoned at the end.
void print_diagnostics(std::FILE* out, const PointResult& r);
void print_spike(std::FILE* out, std::span<const SpikeResult> spikes);

// False with `error` set when the file cannot be written.
bool write_json(const std::string& path, const RunInfo& info, std::span<const PointResult> points,
                std::span<const SpikeResult> spikes, std::string& error);

// Goodput ratio and wasted-work ratio against offered load, one line per policy. The format
// follows the extension (.svg, else PNG). False with `error` set when gnuplot failed.
bool write_plot(const std::string& path, const RunInfo& info, std::span<const PointResult> points,
                std::string& error);
// Goodput over time of a spike run, one line per policy.
bool write_spike_plot(const std::string& path, const RunInfo& info,
                      std::span<const SpikeResult> spikes, std::string& error);
// "out/bench.svg" -> "out/bench-spike.svg"
std::string spike_plot_path(const std::string& path);

// Writes what --json and --plot ask for (the spike plot beside the other); reports failures
// on stderr. False if any failed.
bool write_outputs(const RunInfo& info, std::span<const PointResult> points,
                   std::span<const SpikeResult> spikes);

}  // namespace sandglass::bench

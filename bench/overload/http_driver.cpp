#include "http_driver.hpp"

#include "http_load.hpp"
#include "report.hpp"
#include "rss_sampler.hpp"
#include "schedule.hpp"
#include "stats.hpp"

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

struct HttpPoint {
  PointResult point;
  std::unique_ptr<Recorder> recorder;
};

HttpPoint run_http_point(const Options& o, std::span<const HttpTarget> targets, std::optional<int> pid,
                         double load, double capacity, std::span<const Arrival> arrivals,
                         Duration length) {
  // RSS of the daemon, when we found its process.
  std::optional<RssSampler> rss;
  if (pid) rss.emplace(std::to_string(*pid));
  auto rec = std::make_unique<Recorder>(Clock::now() + 5ms, arrivals);
  const HttpRunStats s = run_http_arrivals(
      targets, {.body = o.body, .max_connections = o.connections}, *rec);
  PointResult r = summarize({.policy = "sandglassd",
                             .load = load,
                             .length = length,
                             .capacity_per_s = capacity,
                             .peak_queue_depth = s.peak_queue_depth,
                             .peak_rss_bytes = rss ? rss->peak_bytes() : 0,
                             .workers = o.workers},
                            *rec);
  print_table_row(stdout, r);
  if (o.verbose) print_diagnostics(stdout, r);
  if (o.verbose || !s.first_error.empty()) {
    std::printf("    client: %zu connections opened, %zu arrivals found no free connection, %zu "
                "transport errors, %zu unexpected answers%s%s\n",
                s.connections_opened, s.no_free_connection, s.transport_errors,
                s.unexpected_status, s.first_error.empty() ? "" : "; first: ",
                s.first_error.c_str());
  }
  return {std::move(r), std::move(rec)};
}

}  // namespace

int run_http(const Options& o) {
  const std::optional<std::vector<HttpTarget>> targets = parse_http_targets(o.target);
  if (!targets) {
    std::fprintf(stderr,
                 "sandglass-overload: --target: expected http://127.0.0.1:PORT[,http://127.0.0.1:PORT...], "
                 "got \"%s\"\n",
                 o.target.c_str());
    return 2;
  }
  // RSS is sampled from the first target's process only.
  const std::optional<int> pid = find_listener_pid(targets->front().port);
  RunInfo info{.options = &o, .machine = describe_machine(), .mode = "http",
               .load_at_start = load_average()};
  const std::size_t closed_loop = std::max<std::size_t>(16, 4 * o.workers);
  info.capacity_per_s =
      measure_http_capacity(*targets, o.body, o.service, closed_loop, o.capacity_duration, o.seed);
  info.capacity_note = fmt::format(
      "{} closed-loop connections for {} against {} (pid {}; --workers {} should match the "
      "daemons' workers in all); service times rounded to whole ms",
      closed_loop, format_duration(o.capacity_duration), o.target,
      pid ? std::to_string(*pid) : std::string{"unknown: no RSS"}, o.workers);
  print_settings(stdout, info);
  if (info.capacity_per_s <= 0) {
    std::fprintf(stderr, "sandglass-overload: no job completed against %s: is sandglassd running?\n",
                 o.target.c_str());
    return 1;
  }
  print_table_header(stdout);

  bool ok = true;
  std::vector<PointResult> points;
  for (std::size_t li = 0; li < o.loads.size(); ++li) {
    const Phase phase{.rate_per_s = o.loads[li] * info.capacity_per_s, .length = o.duration};
    const std::vector<Arrival> arrivals =
        make_schedule({&phase, 1}, o.service, o.deadline, o.seed * 1'000'003 + li);
    HttpPoint p = run_http_point(o, *targets, pid, o.loads[li], info.capacity_per_s, arrivals, o.duration);
    ok = ok && p.point.consistent;
    points.push_back(std::move(p.point));
  }

  std::vector<SpikeResult> spikes;
  if (o.spike) {
    const double c = info.capacity_per_s;
    const std::vector<Phase> phases{{0.8 * c, o.duration}, {1.4 * c, o.duration}, {0.8 * c, o.duration}};
    const std::vector<Arrival> arrivals = make_schedule(phases, o.service, o.deadline, o.seed * 7 + 3);
    HttpPoint p = run_http_point(o, *targets, pid, 1.0, c, arrivals, schedule_length(phases));
    spikes.push_back(analyze_spike("sandglassd", *p.recorder, phases));
    print_spike(stdout, spikes);
  }

  info.load_at_end = load_average();
  std::printf("# load average at the end: %s\n", info.load_at_end.c_str());
  if (!write_outputs(info, points, spikes)) ok = false;
  return ok ? 0 : 1;
}

}  // namespace sandglass::bench

#include "in_process.hpp"

#include "capacity.hpp"
#include "policy.hpp"
#include "report.hpp"
#include "run.hpp"
#include "schedule.hpp"
#include "stall.hpp"
#include "stats.hpp"

#include <fmt/core.h>

#include <malloc.h>

#include <cstdio>

namespace sandglass::bench {
namespace {

struct Run {
  PointResult point;
  std::unique_ptr<RunData> data;  // kept for a spike's time series
};

Run run_policy(const Options& o, const std::string& name, double load, double capacity,
               std::span<const Arrival> arrivals, Duration length) {
  malloc_trim(0);  // what the previous policy freed should not count as this one's RSS
  const PolicyOptions popts{.workers = o.workers,
                            .capacity = o.capacity,
                            .body = o.body,
                            .estimate_quantile = o.estimate_quantile,
                            .estimate_max_age = o.estimate_max_age,
                            .drop_if_cannot_finish = o.drop_if_cannot_finish,
                            .hints = o.hints,
                            .seed = o.seed};
  std::unique_ptr<Policy> policy = make_policy(name, popts);
  warm_up(*policy, o.service, o.workers, o.warm_up_jobs, o.seed + 17);
  std::unique_ptr<RunData> data;
  {
    const Stall stall{o.stall};  // only while the arrivals run
    data = std::make_unique<RunData>(run_arrivals(*policy, arrivals));
  }
  policy.reset();  // joins its threads; every job already has its fate
  PointResult r = summarize({.policy = name,
                             .load = load,
                             .length = length,
                             .capacity_per_s = capacity,
                             .peak_queue_depth = data->peak_queue_depth,
                             .peak_rss_bytes = data->peak_rss_bytes,
                             .abandoned = data->abandoned,
                             .workers = o.workers},
                            *data->recorder);
  if (!data->complete) r.consistent = false;
  return {std::move(r), std::move(data)};
}

}  // namespace

int run_in_process(const Options& o) {
  RunInfo info{.options = &o, .machine = describe_machine(), .mode = "in-process",
               .load_at_start = load_average()};
  info.capacity_per_s = measure_capacity(o.body, o.workers, o.service, o.capacity_duration, o.seed);
  info.capacity_note = fmt::format("{} threads running {} bodies back to back for {}, no queue",
                                   o.workers, to_string(o.body), format_duration(o.capacity_duration));
  print_settings(stdout, info);
  print_table_header(stdout);

  bool ok = true;
  std::vector<PointResult> points;
  for (std::size_t li = 0; li < o.loads.size(); ++li) {
    const double load = o.loads[li];
    const Phase phase{.rate_per_s = load * info.capacity_per_s, .length = o.duration};
    // The same jobs, at the same times, for every policy at this load.
    const std::vector<Arrival> arrivals =
        make_schedule({&phase, 1}, o.service, o.deadline, o.seed * 1'000'003 + li);
    for (const std::string& name : o.policies) {
      Run run = run_policy(o, name, load, info.capacity_per_s, arrivals, o.duration);
      ok = ok && run.point.consistent;
      print_table_row(stdout, run.point);
      if (o.verbose) print_diagnostics(stdout, run.point);
      points.push_back(std::move(run.point));
    }
  }

  std::vector<SpikeResult> spikes;
  if (o.spike) {
    const double c = info.capacity_per_s;
    const std::vector<Phase> phases{{0.8 * c, o.duration}, {1.4 * c, o.duration}, {0.8 * c, o.duration}};
    const std::vector<Arrival> arrivals = make_schedule(phases, o.service, o.deadline, o.seed * 7 + 3);
    for (const std::string& name : o.policies) {
      Run run = run_policy(o, name, 1.0, c, arrivals, schedule_length(phases));
      ok = ok && run.point.consistent;
      spikes.push_back(analyze_spike(name, *run.data->recorder, phases));
    }
    print_spike(stdout, spikes);
  }

  info.load_at_end = load_average();
  std::printf("# load average at the end: %s\n", info.load_at_end.c_str());
  if (!write_outputs(info, points, spikes)) ok = false;
  if (!ok) std::fprintf(stderr, "sandglass-overload: FAILED (see above)\n");
  return ok ? 0 : 1;
}

}  // namespace sandglass::bench

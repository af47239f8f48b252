#include "options.hpp"

#include "policy.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(',', start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

[[noreturn]] void fail(const std::string& flag, const std::string& message) {
  std::fprintf(stderr, "sandglass-overload: %s: %s\n", flag.c_str(), message.c_str());
  std::exit(2);
}

double parse_load(const std::string& text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || !(v > 0) || v > 1000) {
    fail("--load", "expected multiples of capacity above 0 (at most 1000), got \"" + text + "\"");
  }
  return v;
}

std::string join_args(int argc, char** argv) {
  std::string out = "sandglass-overload";
  for (int i = 1; i < argc; ++i) out += std::string{" "} + argv[i];
  return out;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  std::string policies, loads, duration, body = "sleep", service = o.service.describe(),
              deadline = "20ms", capacity_duration;
  bool no_drop = false;
  std::string soak, soak_warm_up, sigterm_phase, stall, estimate_max_age;
  bool no_sigterm = false;
  std::int64_t drain_timeout_ms = o.drain_timeout.count();
  CLI::App app{
      "sandglass-overload: goodput, wasted work and latency of four queueing policies from "
      "light load to 10x overload, open loop.",
      "sandglass-overload"};
  app.add_option("--policies", policies, "fifo,bounded-fifo,drop-expired,sandglass (default: all)");
  app.add_option("--load", loads, "offered loads as multiples of the measured capacity (0.5,1,2,5,10)");
  app.add_option("--duration", duration, "per load point, e.g. 3s (spike: per phase)");
  app.add_option("--workers", o.workers, "worker threads of every policy (8)")->check(CLI::Range(1, 4096));
  app.add_option("--capacity", o.capacity, "queue capacity of bounded-fifo and sandglass (1024)")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--body", body, "sleep (I/O-like) or spin (CPU time)");
  app.add_option("--service", service, "service time: fixed:D, exp:MEAN, lognormal:MEDIAN:SIGMA (exp:2ms)");
  app.add_option("--deadline", deadline,
                 "budget per job from its arrival: D, a distribution or a mix such as "
                 "mix:10ms@0.5,1s@0.5 (20ms)");
  app.add_option("--stall", stall,
                 "in-process: a helper process stops the bench (SIGSTOP) for LENGTH once every "
                 "PERIOD while each point runs, e.g. 50ms@1s");
  app.add_option("--seed", o.seed, "seed of arrivals and job sizes (1)");
  app.add_option("--json", o.json_path, "write the results as JSON to FILE");
  app.add_option("--plot", o.plot_path, "draw goodput and wasted work against load to FILE.svg or .png (gnuplot)");
  app.add_flag("--spike", o.spike, "run 0.8x -> 1.4x -> 0.8x of capacity and report recovery times");
  app.add_option("--target", o.target,
                 "drive running sandglassd instead: http://127.0.0.1:PORT, or several comma-separated "
                 "(a cluster's nodes; the load is spread evenly over them)");
  app.add_flag("--smoke", o.smoke, "a run of a few seconds that checks the bench works (CI)");
  app.add_flag("--verbose", o.verbose, "print diagnostics under each row (generator lag, utilization, ...)");
  app.add_option("--estimate-quantile", o.estimate_quantile, "sandglass: quantile of a kind's run times that must fit before the deadline (0.99, the Runtime's default)")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--estimate-max-age", estimate_max_age,
                 "sandglass: a run time is forgotten after this, or 10 typical runs if longer (20ms, the Runtime's default)");
  std::string hints;
  app.add_option("--hints", hints,
                 "sandglass in-process: each job says its size, none, exact (its service time) or "
                 "noisy:SIGMA (times a lognormal factor, median 1) (none)");
  app.add_flag("--no-drop-if-cannot-finish", no_drop, "sandglass: do not drop at dequeue what cannot finish");
  app.add_option("--capacity-duration", capacity_duration, "how long to measure capacity (3s)");
  app.add_option("--warm-up-jobs", o.warm_up_jobs, "jobs run through each policy before each point (256)");
  app.add_option("--connections", o.connections, "HTTP mode: most connections open at once (512)")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--soak", soak, "soak mode: this long (e.g. 60s) at --load (10) of capacity; RSS, fds, SIGTERM");
  app.add_option("--sandglassd", o.sandglassd_path, "soak: start this sandglassd binary (else drive --target)");
  app.add_option("--cluster", o.cluster_nodes,
                 "cluster mode: start a PostgreSQL and 1..N --sandglassd nodes; measure throughput, "
                 "enqueue->start, claim latency, cancel across nodes, recovery after kill -9")
      ->check(CLI::Range(1, 16));
  std::string cluster_steps;
  app.add_option("--cluster-steps", cluster_steps,
                 "cluster mode: the steps to run, of idle,claims,commits,throughput,overload,cancel,recovery (all)");
  std::string cluster_chaos;
  app.add_option("--cluster-chaos", cluster_chaos,
                 "cluster mode: instead of the steps, this long (e.g. 3m) of mixed load with a random "
                 "fault every ~10 s (kill -9, SIGSTOP, PostgreSQL restart); prints the correctness counts");
  app.add_option("--soak-warm-up", soak_warm_up, "soak: RSS at start is taken after this much of the soak (15s)");
  app.add_option("--max-rss-growth-mib", o.max_rss_growth_mib, "soak: fail when peak or end RSS exceeds the start by more (16)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--sigterm-phase", sigterm_phase, "soak: overload with SIGTERM at its middle, this long (4s)");
  app.add_flag("--no-sigterm", no_sigterm, "soak: skip the SIGTERM phase");
  app.add_option("--drain-timeout-ms", drain_timeout_ms, "soak: the started sandglassd's drain timeout (5000)")
      ->check(CLI::Range(0, 3'600'000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  o.command_line = join_args(argc, argv);
  o.drop_if_cannot_finish = !no_drop;

  if (o.smoke) {
    // Seconds, not minutes; flags given explicitly still win below.
    o.loads = {1, 5};
    o.duration = 250ms;
    if (app.count("--workers") == 0) o.workers = 4;
    o.capacity_duration = 300ms;
    if (app.count("--warm-up-jobs") == 0) o.warm_up_jobs = 64;
  }
  if (!soak.empty()) {
    // A soak overloads the daemon's workers, not its HTTP layer: few workers, jobs of
    // milliseconds (capacity about 100 jobs/s), so 10x is about 1000 requests per second, which
    // one client thread and the daemon's one I/O thread carry on a shared 2-core machine. Explicit flags still win.
    if (app.count("--workers") == 0) o.workers = 2;
    if (app.count("--service") == 0) service = "exp:20ms";
    if (app.count("--deadline") == 0) deadline = "200ms";
    if (loads.empty()) loads = "10";
  }
  if (!cluster_steps.empty()) {
    const std::vector<std::string> all = o.cluster_steps;
    o.cluster_steps = split_list(cluster_steps);
    for (const std::string& step : o.cluster_steps) {
      if (std::find(all.begin(), all.end(), step) == all.end()) {
        fail("--cluster-steps", "unknown step \"" + step + "\" (idle, claims, commits, throughput, overload, cancel, recovery)");
      }
    }
  }
  if (o.cluster_nodes > 0) {
    // The cluster's overload sweep: jobs long enough that the nodes' workers, not the 2 cores'
    // HTTP and SQL work per request, are the capacity (8 workers x 3 nodes / 100 ms = 240
    // jobs/s, so 10x is 2,400 requests/s). Explicit flags still win.
    if (app.count("--service") == 0) service = "exp:100ms";
    if (app.count("--deadline") == 0) deadline = "1s";
    if (loads.empty()) loads = o.smoke ? "2" : "2,5,10";
    if (o.smoke && duration.empty()) duration = "1s";
    // Waiting clients hold their connection until the outcome: 512 per node.
    if (app.count("--connections") == 0) o.connections = 512 * o.cluster_nodes;
  }
  if (!policies.empty()) {
    for (const std::string& p : split_list(policies)) {
      if (std::find(policy_names().begin(), policy_names().end(), p) == policy_names().end()) {
        fail("--policies", "unknown policy \"" + p + "\" (fifo, bounded-fifo, drop-expired, sandglass)");
      }
      o.policies.push_back(p);
    }
  } else {
    for (std::string_view p : policy_names()) o.policies.emplace_back(p);
  }
  if (!loads.empty()) {
    o.loads.clear();
    for (const std::string& l : split_list(loads)) o.loads.push_back(parse_load(l));
  }
  auto parse_d = [](const std::string& flag, const std::string& text) {
    try {
      const Duration d = parse_duration(text);
      if (d <= Duration::zero()) fail(flag, "must be positive, got \"" + text + "\"");
      return d;
    } catch (const std::invalid_argument& e) {
      fail(flag, e.what());
    }
  };
  if (!duration.empty()) o.duration = parse_d("--duration", duration);
  if (!capacity_duration.empty()) o.capacity_duration = parse_d("--capacity-duration", capacity_duration);
  const auto b = body_from_string(body);
  if (!b) fail("--body", "expected sleep or spin, got \"" + body + "\"");
  o.body = *b;
  try {
    o.service = Distribution::parse(service);
  } catch (const std::invalid_argument& e) {
    fail("--service", e.what());
  }
  try {
    o.deadline = Distribution::parse(deadline);
  } catch (const std::invalid_argument& e) {
    fail("--deadline", e.what());
  }
  if (!estimate_max_age.empty()) o.estimate_max_age = parse_d("--estimate-max-age", estimate_max_age);
  if (!hints.empty()) {
    try {
      o.hints = Hints::parse(hints);
    } catch (const std::invalid_argument& e) {
      fail("--hints", e.what());
    }
  }
  if (!stall.empty()) {
    try {
      o.stall = parse_stall(stall);
    } catch (const std::invalid_argument& e) {
      fail("--stall", e.what());
    }
    if (!o.target.empty()) fail("--stall", "stalls the bench process: in-process mode only");
  }
  if (!cluster_chaos.empty()) {
    o.cluster_chaos = parse_d("--cluster-chaos", cluster_chaos);
    if (o.cluster_nodes == 0) o.cluster_nodes = 3;
  }
  if (!soak.empty()) o.soak = parse_d("--soak", soak);
  if (!soak_warm_up.empty()) o.soak_warm_up = parse_d("--soak-warm-up", soak_warm_up);
  if (!sigterm_phase.empty()) o.sigterm_phase = parse_d("--sigterm-phase", sigterm_phase);
  o.sigterm = !no_sigterm;
  o.drain_timeout = std::chrono::milliseconds{drain_timeout_ms};
  if (o.soak > Duration::zero()) {
    if (o.sandglassd_path.empty() == o.target.empty()) {
      fail("--soak", "needs exactly one of --sandglassd PATH (start it) and --target (attach)");
    }
    if (o.soak_warm_up >= o.soak) fail("--soak-warm-up", "must be shorter than --soak");
    if (o.loads.size() != 1) fail("--load", "the soak runs one load");
  } else if (!o.sandglassd_path.empty() && o.cluster_nodes == 0) {
    fail("--sandglassd", "only the soak and cluster modes start daemons (add --soak 60s or --cluster N)");
  }
  if (!o.target.empty()) {
    for (const std::string& t : split_list(o.target)) {
      if (!t.starts_with("http://127.0.0.1:")) {
        fail("--target", "only http://127.0.0.1:PORT targets are driven, got \"" + t + "\"");
      }
    }
    if (o.soak > Duration::zero() && o.target.find(',') != std::string::npos) {
      fail("--target", "the soak drives one daemon: give one URL");
    }
  }
  return o;
}

}  // namespace sandglass::bench

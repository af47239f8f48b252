// options.hpp — the command line of sandglass-overload.
//
//   sandglass-overload [--policies fifo,bounded-fifo,drop-expired,sandglass]
//                      [--load 0.5,1,2,5,10] [--duration 3s] [--workers 8] [--body sleep|spin]
//                      [--service exp:2ms] [--deadline 20ms|mix:10ms@0.5,1s@0.5]
//                      [--stall 50ms@1s] [--estimate-max-age 20ms] [--hints none|exact|noisy:SIGMA]
//                      [--seed 1] [--json FILE]
//                      [--plot FILE.svg|.png] [--spike] [--target http://127.0.0.1:PORT]
//                      [--smoke] ...
//   sandglass-overload --soak 60s (--sandglassd PATH | --target http://127.0.0.1:PORT) ...
//   sandglass-overload --cluster 3 --sandglassd PATH [--workers 8] [--smoke]
//                      [--cluster-steps idle,claims,throughput,overload,cancel,recovery]
//   sandglass-overload --target http://127.0.0.1:P1,http://127.0.0.1:P2,...   (several daemons)
//
// Durations read "250us", "2ms", "1s"; distributions "fixed:D", "exp:MEAN",
// "lognormal:MEDIAN:SIGMA", "uniform:MIN:MAX", "mix:PART@WEIGHT,..." (distribution.hpp);
// stalls "LENGTH@PERIOD" (stall.hpp).
//
// Thread safety: a value type.
#pragma once

#include "distribution.hpp"
#include "hints.hpp"
#include "job_body.hpp"
#include "stall.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sandglass::bench {

struct Options {
  std::vector<std::string> policies;  // default: all, in the bench's order
  std::vector<double> loads{0.5, 1, 2, 5, 10};
  Duration duration = std::chrono::seconds{3};   // per load point (per phase of a spike)
  std::size_t workers = 8;
  std::size_t capacity = 1024;                   // queue capacity of bounded-fifo and sandglass
  Body body = Body::sleep;
  Distribution service = Distribution::parse("exp:2ms");
  Distribution deadline = Distribution::fixed(std::chrono::milliseconds{20});
  StallSpec stall{};  // in-process: the process is stopped this long once per period
  std::uint64_t seed = 1;
  std::string json_path;
  std::string plot_path;
  bool spike = false;
  std::string target;  // HTTP mode when set
  bool smoke = false;
  bool verbose = false;  // a diagnostics line under each table row
  // Sandglass's knobs: the Runtime's defaults (bench/README.md shows what other quantiles do).
  double estimate_quantile = 0.99;  // the Runtime's default
  Duration estimate_max_age = std::chrono::milliseconds{20};  // the Runtime's default
  bool drop_if_cannot_finish = true;
  Hints hints{};  // in-process sandglass: what size each job says it has (--hints)
  // Measurement.
  Duration capacity_duration = std::chrono::seconds{3};
  std::size_t warm_up_jobs = 256;
  std::size_t connections = 512;  // HTTP mode: most connections open at once
  std::string command_line;       // as given, for the report
  // Soak mode (soak.hpp): on when `soak` is positive.
  Duration soak{};
  std::string sandglassd_path;    // start this sandglassd (else attach to --target)
  Duration soak_warm_up = std::chrono::seconds{15};  // RSS "start" is taken after it
  double max_rss_growth_mib = 16;  // peak and end RSS may exceed the start by this much
  Duration sigterm_phase = std::chrono::seconds{4};  // overload with SIGTERM at its middle
  bool sigterm = true;            // only with --sandglassd
  std::chrono::milliseconds drain_timeout{5'000};    // given to the started sandglassd
  // Cluster mode (cluster_bench.hpp): on when positive; starts a PostgreSQL and up to this many
  // --sandglassd nodes.
  std::size_t cluster_nodes = 0;
  // The cluster steps to run (default: all): idle, claims, throughput, overload, cancel, recovery.
  std::vector<std::string> cluster_steps{"idle", "claims", "commits", "throughput", "overload", "cancel", "recovery"};
  // Cluster chaos mode (cluster_chaos.hpp): on when positive, instead of the steps; this long.
  Duration cluster_chaos{};
};

// Exits: 0 after --help, 2 with a message naming the flag on bad input.
Options parse_options(int argc, char** argv);

}  // namespace sandglass::bench

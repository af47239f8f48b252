// schedule.hpp — the open-loop arrival schedule of one load point: Poisson arrivals made up
// front, so that the generator never waits for completions (no coordinated omission) and every
// policy at a load point sees the very same jobs.
//
//   auto jobs = make_schedule({{.rate_per_s = 8000, .length = 5s}}, service, deadline, seed);
//   // jobs[i].at: when job i arrives, from the point's start; .service, .budget
//
// Thread safety: value types.
#pragma once

#include "distribution.hpp"

#include <sandglass/deadline.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace sandglass::bench {

struct Arrival {
  Duration at;       // scheduled arrival, from the point's start
  Duration service;  // the work the job needs (sleep or CPU time)
  Duration budget;   // its deadline, relative to `at`
};

// A stretch of constant arrival rate; phases follow one another.
struct Phase {
  double rate_per_s = 0;
  Duration length{};
};

std::vector<Arrival> make_schedule(std::span<const Phase> phases, const Distribution& service,
                                   const Distribution& deadline, std::uint64_t seed);

// The end of the whole schedule (sum of the phases' lengths).
Duration schedule_length(std::span<const Phase> phases);

}  // namespace sandglass::bench

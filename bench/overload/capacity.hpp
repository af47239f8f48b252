// capacity.hpp — how many jobs per second the workers complete when saturated: `workers`
// threads run job bodies back to back, with no queue and no deadlines in between. Offered
// loads are multiples of this figure; it is an upper bound for every policy (none can hand
// jobs over for free), so goodput ratios measured against it err on the low side.
//
//   double per_s = measure_capacity(Body::sleep, 8, service, 2s, seed);   // Blocks
//
// Thread safety: a free function; it starts and joins its own threads.
#pragma once

#include "distribution.hpp"
#include "job_body.hpp"

#include <cstddef>
#include <cstdint>

namespace sandglass::bench {

double measure_capacity(Body body, std::size_t workers, const Distribution& service,
                        Duration length, std::uint64_t seed);

}  // namespace sandglass::bench

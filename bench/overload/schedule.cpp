#include "schedule.hpp"

#include <chrono>
#include <random>

namespace sandglass::bench {

std::vector<Arrival> make_schedule(std::span<const Phase> phases, const Distribution& service,
                                   const Distribution& deadline, std::uint64_t seed) {
  std::mt19937_64 gaps{seed};
  // Separate streams: the same seed gives the same arrival times whatever the job mix.
  std::mt19937_64 jobs{seed ^ 0x9e3779b97f4a7c15ULL};
  std::vector<Arrival> out;
  double phase_start_s = 0;
  for (const Phase& phase : phases) {
    const double end_s = phase_start_s + std::chrono::duration<double>{phase.length}.count();
    if (phase.rate_per_s > 0) {
      out.reserve(out.size() + static_cast<std::size_t>(phase.rate_per_s * (end_s - phase_start_s) * 1.1));
      std::exponential_distribution<double> gap{phase.rate_per_s};
      // Poisson arrivals are memoryless: restarting the gaps at a phase boundary is exact.
      for (double t = phase_start_s + gap(gaps); t < end_s; t += gap(gaps)) {
        out.push_back({.at = std::chrono::duration_cast<Duration>(std::chrono::duration<double>{t}),
                       .service = service.sample(jobs),
                       .budget = deadline.sample(jobs)});
      }
    }
    phase_start_s = end_s;
  }
  return out;
}

Duration schedule_length(std::span<const Phase> phases) {
  Duration total{};
  for (const Phase& p : phases) total += p.length;
  return total;
}

}  // namespace sandglass::bench

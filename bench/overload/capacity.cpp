#include "capacity.hpp"

#include <random>
#include <thread>
#include <vector>

namespace sandglass::bench {

double measure_capacity(Body body, std::size_t workers, const Distribution& service,
                        Duration length, std::uint64_t seed) {
  std::vector<double> rates(workers, 0.0);
  {
    const TimePoint start = Clock::now();
    const TimePoint end = start + length;
    std::vector<std::jthread> threads;
    for (std::size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        std::mt19937_64 rng{seed * 7919 + w};
        std::size_t done = 0;
        TimePoint last = start;
        while (last < end) {
          run_plain_body(body, service.sample(rng));
          last = Clock::now();
          ++done;
        }
        // Up to this worker's last completion: no half-finished job at the end skews it.
        rates[w] = static_cast<double>(done) / std::chrono::duration<double>{last - start}.count();
      });
    }
  }
  double total = 0;
  for (double r : rates) total += r;
  return total;
}

}  // namespace sandglass::bench

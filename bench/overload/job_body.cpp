#include "job_body.hpp"

#include <ctime>
#include <cstdint>
#include <thread>

namespace sandglass::bench {
namespace {

Duration thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds{ts.tv_sec} + std::chrono::nanoseconds{ts.tv_nsec};
}

// A few microseconds of arithmetic the compiler cannot drop.
void churn() {
  std::uint64_t x = 0x2545f4914f6cdd1dULL;
  for (int i = 0; i < 4000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  asm volatile("" : : "r"(x));  // keep the loop
}

template <typename Check>
void spin_for(Duration service, Check check) {
  const Duration until = thread_cpu_time() + service;
  do {
    check();
    churn();
  } while (thread_cpu_time() < until);
}

}  // namespace

std::optional<Body> body_from_string(std::string_view name) noexcept {
  if (name == "sleep") return Body::sleep;
  if (name == "spin") return Body::spin;
  return std::nullopt;
}

std::string_view to_string(Body body) noexcept { return body == Body::sleep ? "sleep" : "spin"; }

void run_plain_body(Body body, Duration service) {
  if (body == Body::sleep) {
    std::this_thread::sleep_for(service);
  } else {
    spin_for(service, [] {});
  }
}

void run_sandglass_body(Body body, Duration service, JobContext& ctx) {
  if (body == Body::sleep) {
    ctx.sleep_for(service);
  } else {
    spin_for(service, [&ctx] { ctx.checkpoint(); });
  }
}

}  // namespace sandglass::bench

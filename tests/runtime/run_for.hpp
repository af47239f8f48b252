// run_for.hpp — fixtures the runtime's admission tests share: a handler of a given length, and
// an estimate age no test outlives.
#pragma once

#include <sandglass/job_context.hpp>

#include <chrono>
#include <thread>

namespace sandglass::test {

// Runs for at least `d` of wall time, with checkpoints (a handler's length, not a way to order
// events).
inline void run_for(JobContext& ctx, Duration d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    ctx.checkpoint();
    std::this_thread::sleep_for(std::chrono::microseconds{100});
  }
}

// Samples that never age out during a test, however slow the machine.
inline constexpr Duration kForever = std::chrono::hours{1};

}  // namespace sandglass::test

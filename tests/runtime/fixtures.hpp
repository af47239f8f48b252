// fixtures.hpp — what the runtime's tests share: a handler of a given length, an estimate age no
// test outlives, and a gate that holds a worker until released.
#pragma once

#include <sandglass/job_context.hpp>

#include <chrono>
#include <latch>
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

// Holds a worker until released, without a checkpoint (it ignores its cancellation meanwhile);
// lets a test know when the worker is taken.
struct Gate {
  std::latch started{1};
  std::latch release{1};

  JobHandler handler() {
    return [this](JobContext&) {
      started.count_down();
      release.wait();
    };
  }
};

}  // namespace sandglass::test

// IdleWorkers (runtime/idle_workers.hpp): which idle worker a waker claims. It prefers one that
// went to sleep on the waker's core. The test pins its own thread to one core, then the
// other, to play workers that marked themselves idle on each.
#include "runtime/idle_workers.hpp"

#include <doctest/doctest.h>

#include <sched.h>

#include <thread>

using sandglass::detail::IdleWorkers;

namespace {

// Moves the calling thread to `cpu` alone (the kernel migrates it before returning).
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 && sched_getcpu() == cpu;
}

// The two cores this test moves between: the first two the process may run on.
bool two_cores(int& a, int& b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  a = b = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && b < 0; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    (a < 0 ? a : b) = cpu;
  }
  return b >= 0;
}

}  // namespace

TEST_SUITE("Runtime idle workers") {
  TEST_CASE("a waker claims an idle worker that went to sleep on its own core first" *
            doctest::timeout(30)) {
    int a = -1;
    int b = -1;
    if (!two_cores(a, b)) {
      MESSAGE("skipped: the process may run on one core only");
      return;
    }
    // In a thread of its own: the test runner's thread keeps its affinity. Assertions that
    // end the case (REQUIRE) throw, which a thread may not: a failed move returns instead.
    bool pinned = true;
    auto move_to = [&](int cpu) { return pinned = pinned && pin_to(cpu); };
    std::thread t{[&] {
      IdleWorkers idle{3};
      if (!move_to(a)) return;
      idle.prepare(0);
      if (!move_to(b)) return;
      idle.prepare(1);
      if (!move_to(a)) return;
      idle.prepare(2);

      if (!move_to(b)) return;
      CHECK(idle.wake_one());
      CHECK_FALSE(idle.marked(1));  // not the lowest-numbered: the one that slept here
      CHECK(idle.marked(0));
      CHECK(idle.marked(2));
      if (!idle.marked(1)) idle.sleep(1);  // claimed: returns at once

      if (!move_to(a)) return;
      CHECK(idle.wake_one());
      CHECK_FALSE(idle.marked(0));
      CHECK(idle.marked(2));

      // None slept on this core any more: any idle worker is claimed.
      if (!move_to(b)) return;
      CHECK(idle.wake_one());
      CHECK_FALSE(idle.marked(2));
      CHECK_FALSE(idle.wake_one());
      if (!idle.marked(0)) idle.sleep(0);
      if (!idle.marked(2)) idle.sleep(2);
    }};
    t.join();
    CHECK(pinned);
  }
}

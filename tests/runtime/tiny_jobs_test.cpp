// Tiny jobs (runtime_core.hpp, "Tiny jobs"): behind a run of jobs shorter than the hand-off a
// worker stands by while another drains the queue. What must hold: every job still gets one
// outcome, a job that is not tiny gets a worker of its own, and a job of a tiny kind that runs
// long does not keep the others waiting.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;

namespace {

// Two workers, samples kept through the test; "tiny" up to 5 ms, so that no-op jobs count as
// tiny also under a sanitizer.
sandglass::RuntimeOptions two_workers(sandglass::Duration tiny_job = 5ms) {
  return {.workers = 2, .capacity = 32'768, .estimate_max_age = 60s, .tiny_job = tiny_job};
}

// Outcomes by reason, and how many arrived in all.
struct Tally {
  std::atomic<std::uint64_t> outcomes{0};
  std::atomic<std::uint64_t> ok{0};

  sandglass::OutcomeCallback callback() {
    return [this](const Outcome& o) {
      if (o.reason == Reason::ok) ok.fetch_add(1, std::memory_order_relaxed);
      outcomes.fetch_add(1, std::memory_order_relaxed);
    };
  }
};

// `n` no-op jobs of two kinds, in every class, with budgets of 20, 40 and 60 s; the last one's
// handle.
sandglass::JobHandle submit_tiny(Runtime& rt, Tally& tally, std::size_t n) {
  static constexpr std::array kKinds{"tiny-a", "tiny-b"};
  static constexpr std::array kClasses{Priority::critical, Priority::high, Priority::normal,
                                       Priority::sheddable};
  sandglass::JobHandle last;
  for (std::size_t i = 0; i < n; ++i) {
    last = rt.submit({.kind = kKinds[i % 2],
                      .priority = kClasses[i % 4],
                      .budget = std::chrono::seconds{20 * (1 + i % 3)}},
                     [](JobContext& ctx) { ctx.checkpoint(); }, tally.callback());
  }
  return last;
}

// Submits `first`, `between` tiny jobs, `second` and 5,000 tiny jobs more to a runtime whose
// tiny kinds are trained; checks that all end ok (12,000 tiny jobs in all), then shuts down.
void around_tiny_runs(Runtime& rt, Tally& tally, sandglass::JobSpec first_spec,
                      sandglass::JobHandler first, std::size_t between,
                      sandglass::JobSpec second_spec, sandglass::JobHandler second) {
  sandglass::JobHandle a = rt.submit(std::move(first_spec), std::move(first));
  submit_tiny(rt, tally, between);
  sandglass::JobHandle b = rt.submit(std::move(second_spec), std::move(second));
  submit_tiny(rt, tally, 5'000);
  CHECK(a.wait().reason == Reason::ok);
  CHECK(b.wait().reason == Reason::ok);
  rt.shutdown(30s);
  CHECK(tally.ok.load() == 12'000);
}

}  // namespace

TEST_SUITE("Runtime: tiny jobs") {
  TEST_CASE("behind a deep run of tiny jobs a worker stands by and every job still completes" *
            doctest::timeout(60)) {
    Runtime rt{two_workers()};
    Tally tally;
    submit_tiny(rt, tally, 2'000).wait();  // the kinds' medians: tiny
    submit_tiny(rt, tally, 20'000);
    rt.shutdown(30s);
    CHECK(tally.outcomes.load() == 22'000);
    CHECK(tally.ok.load() == 22'000);
    const sandglass::RuntimeStats s = rt.stats();
    CHECK(s.count(Reason::ok) == 22'000);
    CHECK(s.stand_bys > 0);
  }

  TEST_CASE("with tiny_job zero no worker ever stands by" * doctest::timeout(60)) {
    Runtime rt{two_workers(sandglass::Duration::zero())};
    Tally tally;
    submit_tiny(rt, tally, 2'000).wait();
    submit_tiny(rt, tally, 20'000);
    rt.shutdown(30s);
    CHECK(tally.ok.load() == 22'000);
    CHECK(rt.stats().stand_bys == 0);
  }

  TEST_CASE("two jobs that need each other at once get both workers after a run of tiny jobs" *
            doctest::timeout(60)) {
    Runtime rt{two_workers()};
    Tally tally;
    submit_tiny(rt, tally, 2'000).wait();
    // Each waits at its checkpoints until the other runs; alone, it meets its deadline.
    std::atomic<int> arrived{0};
    auto meet = [&arrived](JobContext& ctx) {
      arrived.fetch_add(1);
      while (arrived.load() < 2) ctx.checkpoint();
    };
    // Behind 5,000 tiny jobs (a worker stands by), the two at once, then 5,000 more.
    submit_tiny(rt, tally, 5'000);
    around_tiny_runs(rt, tally, {.kind = "pair", .budget = 10s}, meet, 0,
                     {.kind = "pair", .budget = 10s}, meet);
  }

  TEST_CASE("a job of a tiny kind that runs long does not keep the queued ones waiting" *
            doctest::timeout(60)) {
    Runtime rt{two_workers()};
    Tally tally;
    submit_tiny(rt, tally, 2'000).wait();
    // Estimated tiny, it waits for a job queued behind thousands of others: only a worker that
    // stops standing by can run that one.
    std::atomic<bool> reached{false};
    around_tiny_runs(
        rt, tally, {.kind = "tiny-a", .budget = 10s},
        [&](JobContext& ctx) {
          while (!reached.load()) ctx.checkpoint();
        },
        5'000, {.kind = "tiny-b", .budget = 10s}, [&](JobContext&) { reached.store(true); });
  }

  TEST_CASE("a long job on one worker does not keep the other two from standing by in turn" *
            doctest::timeout(60)) {
    sandglass::RuntimeOptions options = two_workers();
    options.workers = 3;
    Runtime rt{options};
    Tally tally;
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    sandglass::JobHandle long_job = rt.submit({.kind = "long", .budget = 50s}, [&](JobContext& ctx) {
      started.store(true);
      while (!release.load()) ctx.checkpoint();
    });
    while (!started.load()) std::this_thread::yield();
    submit_tiny(rt, tally, 2'000).wait();
    submit_tiny(rt, tally, 20'000);
    while (tally.outcomes.load() < 22'000) std::this_thread::sleep_for(1ms);
    // The long job ran all along: the stand-bys counted came from the two others.
    CHECK(rt.stats().stand_bys > 0);
    CHECK(rt.stats().running == 1);
    release.store(true);
    CHECK(long_job.wait().reason == Reason::ok);
    rt.shutdown(30s);
    CHECK(tally.ok.load() == 22'000);
  }

  TEST_CASE("a negative tiny_job is refused with a message naming it") {
    sandglass::RuntimeOptions o;
    o.tiny_job = -1us;
    CHECK(o.validate() == "tiny_job: must not be negative");
  }
}

// The reference test plan (shared/reference/deadline-budgets.de.txt, "Den Ablauf an jeder Grenze
// testen"), the cases that live inside one process. Numbers follow the plan.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <map>
#include <mutex>
#include <vector>

using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

TEST_SUITE("TestPlan") {
  TEST_CASE("1: a job without a caller budget gets the default budget" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8, .budget = {.default_budget = 2s, .max_budget = 10s}}};
    const Outcome o = rt.submit({.kind = "k"}, [](JobContext&) {}).wait();
    CHECK(o.state == State::completed);
    CHECK(o.timings.budget == 2s);
  }

  TEST_CASE("2: an excessive caller budget is clamped to the maximum" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8, .budget = {.default_budget = 2s, .max_budget = 10s}}};
    sandglass::Deadline seen;
    const Outcome o = rt.submit({.kind = "k", .budget = 24h}, [&](JobContext& ctx) {
                         seen = ctx.deadline();
                       }).wait();
    CHECK(o.timings.budget == 10s);
    CHECK(seen.remaining() <= 10s);
    const Outcome far = rt.submit({.kind = "k", .deadline = sandglass::Deadline::never()},
                                  [](JobContext&) {}).wait();
    CHECK(far.timings.budget == 10s);
  }

  TEST_CASE("3: a budget that runs out while queued never starts and its submitter learns at once" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch started{1};
    std::latch release{1};
    auto blocker = rt.submit({.kind = "block"}, [&](JobContext&) {
      started.count_down();
      release.wait();
    });
    started.wait();
    std::atomic<bool> ran{false};
    auto h = rt.submit({.kind = "downstream-call", .budget = 30ms}, [&](JobContext&) { ran = true; });
    // The outcome arrives while the only worker is still blocked: the timer expired it.
    const Outcome o = h.wait();
    CHECK(o.state == State::expired);
    CHECK(o.reason == Reason::expired_in_queue);
    CHECK(o.timings.queue_wait >= 30ms);
    CHECK(o.timings.run_time == 0s);
    CHECK_FALSE(blocker.done());
    release.count_down();
    blocker.wait();
    CHECK_FALSE(ran.load());
  }

  TEST_CASE("6: when the caller cancels early the running job and its child work stop" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch running{1};
    std::atomic<int> child_work_stopped{0};
    CancelCause child_cause = CancelCause::none;
    auto h = rt.submit({.kind = "fan-out", .budget = 60s}, [&](JobContext& ctx) {
      sandglass::CancelSource child{ctx.token()};  // e.g. a downstream call
      auto stop_child = child.token().on_cancel([&]() noexcept { child_work_stopped.fetch_add(1); });
      running.count_down();
      try {
        for (;;) ctx.checkpoint();
      } catch (const sandglass::Cancelled&) {
        child_cause = child.cause();
        throw;
      }
    });
    running.wait();
    CHECK(h.cancel());
    const Outcome o = h.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_while_running);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.timings.remaining_at_end > 50s);  // long before the configured deadline
    CHECK(child_cause == CancelCause::upstream);
    CHECK(child_work_stopped.load() == 1);
  }

  TEST_CASE("10: a burst far above capacity does not let expired work pile up" *
            doctest::timeout(60)) {
    constexpr std::size_t kCapacity = 16;
    constexpr int kJobs = 3000;
    Runtime rt{{.workers = 2, .capacity = kCapacity}};
    std::mutex mu;
    std::map<sandglass::JobId, int> outcomes_per_job;
    std::vector<Outcome> started;
    std::latch all_done{kJobs};
    std::vector<sandglass::JobHandle> handles;
    handles.reserve(kJobs);
    for (int i = 0; i < kJobs; ++i) {
      handles.push_back(rt.submit(
          {.kind = "work", .budget = 20ms},
          [](JobContext& ctx) {
            const auto until = sandglass::Clock::now() + 1ms;
            while (sandglass::Clock::now() < until) ctx.checkpoint();
          },
          [&](const Outcome& o) {
            {
              std::lock_guard lock{mu};
              ++outcomes_per_job[o.id];
              if (o.started()) started.push_back(o);
            }
            all_done.count_down();
          }));
    }
    all_done.wait();
    std::lock_guard lock{mu};
    CHECK(outcomes_per_job.size() == kJobs);
    for (const auto& [id, count] : outcomes_per_job) CHECK(count == 1);
    for (const auto& h : handles) CHECK(outcomes_per_job.count(h.id()) == 1);
    const auto stats = rt.stats();
    CHECK(stats.peak_queued <= kCapacity);
    CHECK(stats.submitted == kJobs);
    std::uint64_t total = 0;
    for (auto n : stats.outcomes) total += n;
    CHECK(total == kJobs);
    // Far more than two workers can do in time: most is turned away, fast.
    CHECK(stats.count(Reason::queue_full) + stats.count(Reason::deadline_implausible) > 0);
    for (const Outcome& o : started) CHECK(o.timings.remaining_at_start > 0s);  // none started late
  }
}

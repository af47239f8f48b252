// The Runtime's lock-free admission (DeadlineQueue's inbox): concurrent submitters with mixed
// kinds, classes and budgets get exactly one outcome per job, jobs in the inbox count for
// the locked decisions after them, and shutdown ends the jobs still in the inbox.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {

// Counts the outcome callbacks of job i (its index among all submitted) and keeps the reason.
struct Ledger {
  explicit Ledger(std::size_t n) : calls(n), reasons(n) {}
  std::vector<std::atomic<int>> calls;
  std::vector<std::atomic<Reason>> reasons;
  sandglass::OutcomeCallback callback(std::size_t i) {
    return [this, i](const Outcome& o) {
      calls[i].fetch_add(1, std::memory_order_relaxed);
      reasons[i].store(o.reason, std::memory_order_relaxed);
    };
  }
};

// Runs `producers` threads that start together; thread p calls submit(p, n) for its `each`
// jobs, n = p × each + i. Returns when all have submitted.
template <typename Submit>
void submit_concurrently(std::size_t producers, std::size_t each, const Submit& submit) {
  std::latch go{static_cast<std::ptrdiff_t>(producers)};
  std::vector<std::jthread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      go.arrive_and_wait();
      for (std::size_t i = 0; i < each; ++i) submit(p, p * each + i);
    });
  }
}

}  // namespace

TEST_SUITE("Runtime inbox") {
  TEST_CASE("concurrent submitters of mixed kinds, classes and budgets get exactly one outcome "
            "per job, the same the handle reports" *
            doctest::timeout(120)) {
    constexpr std::size_t kProducers = 4;
    constexpr std::size_t kEach = 1500;
    // A bulkhead kind (locked path), tiny budgets (rejections and expiries), long ones (the
    // lock-free path), four classes; some jobs are cancelled at once.
    Runtime rt{{.workers = 2, .capacity = 512, .kind_limits = {{"limited", 1}}}};
    Ledger ledger{kProducers * kEach};
    std::vector<std::vector<JobHandle>> handles(kProducers);
    submit_concurrently(kProducers, kEach, [&](std::size_t p, std::size_t n) {
      static const char* const kKinds[] = {"quick", "spin", "limited"};
      const std::string kind = kKinds[n % 3];
      const auto priority = static_cast<Priority>(n % 4);
      const sandglass::Duration budget = n % 7 == 0 ? 2ms : (n % 5 == 0 ? 50ms : 30s);
      JobHandle h = rt.submit({.kind = kind, .priority = priority, .budget = budget},
                              [kind](JobContext& ctx) {
                                ctx.checkpoint();
                                if (kind == "spin") {
                                  const auto until = sandglass::Clock::now() + 20us;
                                  while (sandglass::Clock::now() < until) ctx.checkpoint();
                                }
                              },
                              ledger.callback(n));
      if (n % 11 == 0) h.cancel();
      handles[p].push_back(std::move(h));
    });
    std::size_t ok = 0;
    for (std::size_t p = 0; p < kProducers; ++p) {
      for (std::size_t i = 0; i < kEach; ++i) {
        const Outcome o = handles[p][i].wait();
        const std::size_t n = p * kEach + i;
        CHECK(o.reason == ledger.reasons[n].load());
        CHECK(o.state == sandglass::state_of(o.reason));
        INFO("job ", n, " ended ", sandglass::to_string(o.reason));
        // What these specs can end with (no handler throws or fails). A 2 ms budget is
        // budget_too_small when its submitter was preempted for more than 1 ms between the
        // deadline's stamp and the locked decision (min_useful is 1 ms).
        CHECK((o.reason == Reason::ok || o.reason == Reason::completed_after_cancel ||
               o.reason == Reason::budget_too_small ||
               o.reason == Reason::expired_in_queue || o.reason == Reason::too_late_to_start ||
               o.reason == Reason::deadline_implausible || o.reason == Reason::queue_full ||
               o.reason == Reason::shed || o.reason == Reason::cancelled_in_queue ||
               o.reason == Reason::cancelled_while_running));
        ok += o.reason == Reason::ok ? 1 : 0;
      }
    }
    rt.shutdown(5s);
    std::size_t once = 0;
    for (const auto& calls : ledger.calls) once += calls.load() == 1 ? 1 : 0;
    CHECK(once == kProducers * kEach);
    CHECK(ok > 0);
    const sandglass::RuntimeStats s = rt.stats();
    std::uint64_t outcomes = 0;
    for (const std::uint64_t count : s.outcomes) outcomes += count;
    CHECK(s.submitted == kProducers * kEach);
    CHECK(outcomes == kProducers * kEach);
    CHECK(s.queued == 0);
  }

  TEST_CASE("racing submitters of equal budgets: each deadline is its admission time plus "
            "its budget, and a deadline the caller gave is kept exactly" *
            doctest::timeout(120)) {
    // Four submitters, three classes, two budgets and absolute deadlines, behind a busy worker
    // (the jobs stay queued, so the later ones cannot start before the earlier are linked).
    // A submitter that read the clock before another but claims its class's order after it
    // is admitted with a later clock reading (see RuntimeCore::admit_lock_free); a deadline
    // given as an absolute time must never move.
    constexpr std::size_t kProducers = 4;
    constexpr std::size_t kEach = 2000;
    Runtime rt{{.workers = 1, .capacity = kProducers * kEach + 16}};
    std::latch running{1};
    std::latch release{1};
    JobHandle blocker = rt.submit({.kind = "block", .budget = 60s}, [&](JobContext&) {
      running.count_down();
      release.wait();
    });
    running.wait();
    const sandglass::Deadline given = sandglass::Deadline::after(40s);
    std::vector<std::vector<JobHandle>> handles(kProducers);
    submit_concurrently(kProducers, kEach, [&](std::size_t p, std::size_t n) {
      // One budget per class: the racing submitters of a class hold equal budgets.
      sandglass::JobSpec spec{.kind = n % 3 == 0 ? "even" : "odd"};
      if (n % 5 == 0) {
        spec.priority = Priority::critical;
        spec.deadline = given;
      } else {
        spec.priority = n % 2 == 0 ? Priority::high : Priority::normal;
        spec.budget = n % 2 == 0 ? 20s : 30s;
      }
      handles[p].push_back(rt.submit(std::move(spec), [](JobContext& ctx) { ctx.checkpoint(); }));
    });
    std::size_t given_kept = 0;
    std::size_t stamped = 0;
    for (std::size_t p = 0; p < kProducers; ++p) {
      for (std::size_t i = 0; i < kEach; ++i) {
        const std::size_t n = p * kEach + i;
        const sandglass::JobProgress pr = handles[p][i].progress();
        CAPTURE(n);
        CHECK_FALSE(pr.started_at.has_value());
        if (n % 5 == 0) {
          given_kept += pr.deadline == given ? 1 : 0;
        } else {
          CHECK(pr.budget == (n % 2 == 0 ? 20s : 30s));
          stamped += pr.deadline.time_point() == pr.enqueued_at + pr.budget ? 1 : 0;
        }
      }
    }
    CHECK(given_kept == kProducers * kEach / 5);
    CHECK(stamped == kProducers * kEach - kProducers * kEach / 5);
    release.count_down();
    CHECK(blocker.wait().reason == Reason::ok);
    for (auto& mine : handles) {
      for (JobHandle& h : mine) CHECK(h.wait().reason == Reason::ok);
    }
  }

  TEST_CASE("jobs admitted lock-free count as work ahead for a later locked decision" *
            doctest::timeout(60)) {
    // Samples kept for an hour: the estimate must not age out during the test.
    Runtime rt{{.workers = 1, .capacity = 256, .estimate_max_age = std::chrono::hours{1}}};
    // "slow" takes at least 10 ms.
    for (int i = 0; i < 8; ++i) {
      rt.submit({.kind = "slow", .budget = 10s}, [](JobContext& ctx) { ctx.sleep_for(10ms); }).wait();
    }
    std::latch running{1};
    std::latch release{1};
    JobHandle blocker = rt.submit({.kind = "block", .budget = 60s}, [&](JobContext&) {
      running.count_down();
      release.wait();
    });
    running.wait();
    // 100 critical "slow" jobs queue behind the blocker (at least 1 s of work): in class
    // order, so they take the lock-free path, and nobody links them while the worker is busy.
    std::vector<JobHandle> critical;
    for (int i = 0; i < 100; ++i) {
      critical.push_back(rt.submit({.kind = "slow", .priority = Priority::critical, .budget = 60s},
                                   [](JobContext&) {}));
    }
    // A normal job with 500 ms runs after all of them: implausible, whichever path they took.
    const Outcome late = rt.submit({.kind = "slow", .budget = 500ms}, [](JobContext&) {}).wait();
    CHECK(late.reason == Reason::deadline_implausible);
    CHECK(late.state == State::rejected);
    // With 60 s it fits.
    JobHandle fits = rt.submit({.kind = "slow", .budget = 60s}, [](JobContext&) {});
    release.count_down();
    CHECK(blocker.wait().reason == Reason::ok);
    for (JobHandle& h : critical) CHECK(h.wait().reason == Reason::ok);
    CHECK(fits.wait().reason == Reason::ok);
  }

  TEST_CASE("shutdown ends every job, the ones still in the inbox and those submitted meanwhile" *
            doctest::timeout(120)) {
    for (int round = 0; round < 20; ++round) {
      CAPTURE(round);
      constexpr std::size_t kProducers = 3;
      constexpr std::size_t kEach = 300;
      Ledger ledger{kProducers * kEach};
      std::optional<Runtime> rt;
      rt.emplace(sandglass::RuntimeOptions{.workers = 2, .capacity = 4096});
      std::latch go{kProducers + 1};
      std::vector<std::jthread> producers;
      for (std::size_t p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
          go.arrive_and_wait();
          for (std::size_t i = 0; i < kEach; ++i) {
            const std::size_t n = p * kEach + i;
            rt->submit({.kind = n % 2 == 0 ? "a" : "b", .priority = static_cast<Priority>(n % 4),
                        .budget = 30s},
                       [](JobContext& ctx) { ctx.checkpoint(); }, ledger.callback(n));
          }
        });
      }
      go.arrive_and_wait();
      rt->shutdown(0ms);  // races the producers: queued, in the inbox, or refused
      producers.clear();
      rt.reset();
      for (std::size_t n = 0; n < kProducers * kEach; ++n) {
        REQUIRE(ledger.calls[n].load() == 1);
        const Reason r = ledger.reasons[n].load();
        INFO("job ", n, ": ", sandglass::to_string(r));
        // A running job the shutdown cancels after its only checkpoint still completes.
        CHECK((r == Reason::ok || r == Reason::cancelled_in_queue || r == Reason::shutting_down ||
               r == Reason::cancelled_while_running || r == Reason::completed_after_cancel));
      }
    }
  }
}

#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include "tests/runtime/fixtures.hpp"

#include <atomic>
#include <barrier>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::test::Gate;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {


// Runs for at least `d` of wall time, checking for cancellation all along.
void busy_for(JobContext& ctx, sandglass::Duration d) {
  const auto until = sandglass::Clock::now() + d;
  while (sandglass::Clock::now() < until) ctx.checkpoint();
}

}  // namespace

TEST_SUITE("Runtime") {
  TEST_CASE("a job that returns completes with reason ok and carries its result" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 2, .capacity = 8}};
    auto h = rt.submit({.kind = "echo", .budget = 5s},
                       [](JobContext& ctx) { ctx.set_result("hello"); });
    const Outcome o = h.wait();
    CHECK(o.id == h.id());
    CHECK(o.kind == "echo");
    CHECK(o.state == State::completed);
    CHECK(o.reason == Reason::ok);
    CHECK(o.cause == CancelCause::none);
    CHECK(o.result == "hello");
    CHECK(o.timings.budget == 5s);
    CHECK(o.timings.remaining_at_start > 0s);
    CHECK(o.timings.remaining_at_end <= o.timings.remaining_at_start);
    CHECK(h.done());
    REQUIRE(h.outcome().has_value());
    CHECK(h.outcome()->result == "hello");
  }

  TEST_CASE("a handle reports its progress and start and stats count queued jobs per class" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto high = rt.submit({.kind = "q", .priority = Priority::high}, [](JobContext&) {});
    auto low1 = rt.submit({.kind = "q", .priority = Priority::sheddable}, [](JobContext&) {});
    auto low2 = rt.submit({.kind = "q", .priority = Priority::sheddable}, [](JobContext&) {});
    CHECK(blocker.started());
    CHECK_FALSE(high.started());
    CHECK(blocker.progress().started_at.has_value());
    CHECK_FALSE(high.progress().started_at.has_value());
    CHECK(high.progress().budget == rt.options().budget.default_budget);
    CHECK(high.progress().deadline == sandglass::Deadline::after(high.progress().budget,
                                                                 high.progress().enqueued_at));
    const sandglass::RuntimeStats s = rt.stats();
    CHECK(s.queued == 3);
    CHECK(s.queued_by_priority[static_cast<std::size_t>(Priority::critical)] == 0);
    CHECK(s.queued_by_priority[static_cast<std::size_t>(Priority::high)] == 1);
    CHECK(s.queued_by_priority[static_cast<std::size_t>(Priority::normal)] == 0);
    CHECK(s.queued_by_priority[static_cast<std::size_t>(Priority::sheddable)] == 2);
    gate.release.count_down();
    high.wait();
    CHECK(high.started());
    CHECK_FALSE(sandglass::JobHandle{}.started());
  }

  TEST_CASE("stop_admitting rejects new jobs with shutting_down while queued and running ones go on" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto running = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto queued = rt.submit({.kind = "q"}, [](JobContext&) {});
    rt.stop_admitting();
    rt.stop_admitting();
    const Outcome refused = rt.submit({.kind = "late"}, [](JobContext&) {}).wait();
    CHECK(refused.state == State::rejected);
    CHECK(refused.reason == Reason::shutting_down);
    gate.release.count_down();
    CHECK(running.wait().reason == Reason::ok);
    CHECK(queued.wait().reason == Reason::ok);
    rt.shutdown(1s);
  }

  TEST_CASE("outcome timings add up from the budget through queue wait and run time to the remaining time" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto h = rt.submit({.kind = "timed", .budget = 5s}, [](JobContext& ctx) { busy_for(ctx, 2ms); });
    std::thread releaser{[&] {
      // Let the job wait a little: until the blocker has been running for 3 ms.
      const auto until = sandglass::Clock::now() + 3ms;
      while (sandglass::Clock::now() < until) {
      }
      gate.release.count_down();
    }};
    const Outcome o = h.wait();
    releaser.join();
    const sandglass::Timings& t = o.timings;
    CHECK(t.budget == 5s);
    CHECK(t.queue_wait >= 3ms);
    CHECK(t.run_time >= 2ms);
    CHECK(t.remaining_at_start == t.budget - t.queue_wait);
    CHECK(t.remaining_at_end == t.remaining_at_start - t.run_time);
  }

  TEST_CASE("a handler that throws fails with its error text and the worker keeps serving" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto bad = rt.submit({.kind = "bad"}, [](JobContext&) { throw std::runtime_error{"boom"}; });
    auto good = rt.submit({.kind = "good"}, [](JobContext&) {});
    const Outcome o = bad.wait();
    CHECK(o.state == State::failed);
    CHECK(o.reason == Reason::handler_error);
    CHECK(o.error == "boom");
    CHECK(good.wait().state == State::completed);
  }

  TEST_CASE("a handler that throws JobFailed fails with that reason and keeps its result" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1}};
    const Outcome o = rt.submit({.kind = "dep"}, [](JobContext& ctx) {
                          ctx.set_result("partial");
                          throw sandglass::JobFailed{Reason::breaker_open, "upstream db is down"};
                        }).wait();
    CHECK(o.state == State::failed);
    CHECK(o.reason == Reason::breaker_open);
    CHECK(o.error == "upstream db is down");
    CHECK(o.result == "partial");
  }

  TEST_CASE("a handler that throws while cancelled counts as cancelled and keeps its error" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch running{1};
    auto h = rt.submit({.kind = "io"}, [&](JobContext& ctx) {
      std::latch cancelled{1};
      auto seen = ctx.token().on_cancel([&]() noexcept { cancelled.count_down(); });
      running.count_down();
      cancelled.wait();
      throw std::runtime_error{"socket closed"};  // what a cancelled socket read looks like
    });
    running.wait();
    h.cancel();
    const Outcome o = h.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_while_running);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.error == "socket closed");
  }

  TEST_CASE("a running job that never returns is cancelled at a checkpoint once its deadline passes" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 2, .capacity = 64}};
    auto h = rt.submit({.kind = "resize", .priority = Priority::normal, .budget = 50ms},
                       [](JobContext& ctx) { for (;;) ctx.checkpoint(); });
    const Outcome o = h.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_while_running);
    CHECK(o.cause == CancelCause::deadline);
    CHECK(o.timings.run_time > 0s);
    CHECK(o.timings.remaining_at_end <= 0s);
  }

  TEST_CASE("a job sleeping past its deadline is woken by the deadline and cancelled" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto h = rt.submit({.kind = "sleep", .budget = 50ms}, [](JobContext& ctx) { ctx.sleep_for(60s); });
    const Outcome o = h.wait();  // the doctest timeout proves it did not sleep for a minute
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_while_running);
    CHECK(o.cause == CancelCause::deadline);
  }

  TEST_CASE("cancelling a queued job removes it at once with cause caller" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    std::atomic<bool> ran{false};
    auto queued = rt.submit({.kind = "victim"}, [&](JobContext&) { ran = true; });
    CHECK(queued.cancel());
    const Outcome o = queued.wait();  // answered while the only worker is still blocked
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_in_queue);
    CHECK(o.cause == CancelCause::caller);
    CHECK_FALSE(queued.cancel());  // a second cancel changes nothing
    gate.release.count_down();
    CHECK(blocker.wait().state == State::completed);
    CHECK_FALSE(ran.load());
  }

  TEST_CASE("a cancellation after the commit point lets the job complete and says so" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch committed{1};
    std::atomic<int> after_commit_callbacks{0};
    auto h = rt.submit({.kind = "write"}, [&](JobContext& ctx) {
      const auto after_commit =
          ctx.on_cancel([&]() noexcept { after_commit_callbacks.fetch_add(1); });
      std::latch cancelled{1};
      auto seen = ctx.token().on_cancel([&]() noexcept { cancelled.count_down(); });
      ctx.commit();
      committed.count_down();
      cancelled.wait();
      ctx.checkpoint();  // no longer throws
      ctx.set_result("written");
    });
    committed.wait();
    CHECK(h.cancel());
    const Outcome o = h.wait();
    CHECK(o.state == State::completed);
    CHECK(o.reason == Reason::completed_after_cancel);
    CHECK(o.cause == CancelCause::caller);
    CHECK(o.result == "written");
    CHECK(o.committed);
    CHECK(after_commit_callbacks.load() == 0);
  }

  TEST_CASE("commit throws when the cancellation came first" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch started{1};
    std::atomic<bool> wrote{false};
    auto h = rt.submit({.kind = "write"}, [&](JobContext& ctx) {
      std::latch cancelled{1};
      auto seen = ctx.token().on_cancel([&]() noexcept { cancelled.count_down(); });
      started.count_down();
      cancelled.wait();
      ctx.commit();
      wrote = true;
    });
    started.wait();
    h.cancel();
    const Outcome o = h.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.cause == CancelCause::caller);
    CHECK_FALSE(wrote.load());
  }

  TEST_CASE("a job with too small a budget is rejected before it costs anything" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8, .budget = {.min_useful = 5ms}}};
    std::atomic<bool> ran{false};
    auto h = rt.submit({.kind = "k", .budget = 4ms}, [&](JobContext&) { ran = true; });
    REQUIRE(h.done());  // the rejection is there before submit returns
    const Outcome o = h.wait();
    CHECK(o.state == State::rejected);
    CHECK(o.reason == Reason::budget_too_small);
    CHECK_FALSE(ran.load());
  }

  TEST_CASE("a job that its kind's observed run time cannot fit is rejected as implausible" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    CHECK(rt.submit({.kind = "slow"}, [](JobContext& ctx) { busy_for(ctx, 200ms); }).wait().state ==
          State::completed);
    auto h = rt.submit({.kind = "slow", .budget = 100ms}, [](JobContext&) {});
    const Outcome rejected = h.wait();
    CHECK(rejected.reason == Reason::deadline_implausible);
    // Ended as of the clock reading it was decided at: it never waited, its budget is whole.
    CHECK(rejected.timings.budget == 100ms);
    CHECK(rejected.timings.queue_wait == sandglass::Duration::zero());
    CHECK(rejected.timings.remaining_at_end == 100ms);
    // Another kind without samples is admitted with the same budget (enough for an idle worker
    // to start it on a loaded machine under a sanitizer).
    CHECK(rt.submit({.kind = "fresh", .budget = 100ms}, [](JobContext&) {}).wait().state ==
          State::completed);
  }

  TEST_CASE("a job admitted elsewhere (JobSpec::admitted) skips the prediction, not its deadline" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    CHECK(rt.submit({.kind = "slow"}, [](JobContext& ctx) { busy_for(ctx, 200ms); }).wait().state ==
          State::completed);
    // The kind's estimate cannot fit 100 ms: refused when the runtime decides, run when the
    // decision was made before (a cluster's claim), with the same budget and a second kind.
    CHECK(rt.submit({.kind = "slow", .budget = 100ms}, [](JobContext&) {}).wait().reason ==
          Reason::deadline_implausible);
    CHECK(rt.submit({.kind = "slow", .budget = 100ms, .admitted = true}, [](JobContext&) {})
              .wait()
              .state == State::completed);
    // Its deadline still applies: one that waits past it behind a running job of another class
    // is dropped unstarted.
    Gate gate;
    auto blocker = rt.submit({.kind = "block", .priority = Priority::critical}, gate.handler());
    gate.started.wait();
    std::atomic<bool> ran{false};
    auto late = rt.submit({.kind = "slow", .priority = Priority::high, .budget = 30ms, .admitted = true},
                          [&](JobContext&) { ran = true; });
    std::this_thread::sleep_for(60ms);
    gate.release.count_down();
    CHECK(late.wait().reason == Reason::expired_in_queue);
    CHECK_FALSE(ran.load());
    CHECK(blocker.wait().state == State::completed);
  }

  TEST_CASE("a full queue sheds its latest sheddable job for a critical one and then refuses" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 2}};
    Gate gate;
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto early = rt.submit({.kind = "s", .priority = Priority::sheddable, .budget = 10s},
                           [](JobContext&) {});
    auto late = rt.submit({.kind = "s", .priority = Priority::sheddable, .budget = 20s},
                          [](JobContext&) {});
    auto critical = rt.submit({.kind = "c", .priority = Priority::critical, .budget = 10s},
                              [](JobContext&) {});
    const Outcome shed = late.wait();
    CHECK(shed.state == State::rejected);
    CHECK(shed.reason == Reason::shed);
    auto refused = rt.submit({.kind = "s", .priority = Priority::sheddable, .budget = 10s},
                             [](JobContext&) {});
    CHECK(refused.wait().reason == Reason::queue_full);
    CHECK_FALSE(critical.done());
    gate.release.count_down();
    CHECK(critical.wait().state == State::completed);
    CHECK(early.wait().state == State::completed);
  }

  TEST_CASE("jobs run highest class first and earliest deadline first within a class" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    std::vector<std::string> order;  // written by the only worker, read after wait()
    auto record = [&order](std::string name) {
      return [&order, name](JobContext&) { order.push_back(name); };
    };
    std::vector<sandglass::JobHandle> handles;
    handles.push_back(rt.submit({.kind = "k", .priority = Priority::sheddable, .budget = 1s}, record("sheddable")));
    handles.push_back(rt.submit({.kind = "k", .priority = Priority::normal, .budget = 9s}, record("normal-late")));
    handles.push_back(rt.submit({.kind = "k", .priority = Priority::normal, .budget = 5s}, record("normal-early")));
    handles.push_back(rt.submit({.kind = "k", .priority = Priority::critical, .budget = 9s}, record("critical")));
    handles.push_back(rt.submit({.kind = "k", .priority = Priority::high, .budget = 9s}, record("high")));
    gate.release.count_down();
    for (auto& h : handles) h.wait();
    CHECK(order == std::vector<std::string>{"critical", "high", "normal-early", "normal-late", "sheddable"});
  }

  TEST_CASE("a bulkhead keeps one kind from taking every worker" * doctest::timeout(10)) {
    Runtime rt{{.workers = 2, .capacity = 8, .kind_limits = {{"slow", 1}}}};
    Gate gate;
    auto first = rt.submit({.kind = "slow"}, gate.handler());
    gate.started.wait();
    std::atomic<bool> second_ran{false};
    auto second = rt.submit({.kind = "slow"}, [&](JobContext&) { second_ran = true; });
    auto other = rt.submit({.kind = "fast"}, [](JobContext&) {});
    CHECK(other.wait().state == State::completed);  // the free worker serves another kind
    CHECK_FALSE(second_ran.load());                 // but not a second "slow" job
    CHECK_FALSE(second.done());
    gate.release.count_down();
    CHECK(first.wait().state == State::completed);
    CHECK(second.wait().state == State::completed);
    CHECK(second_ran.load());
  }

  TEST_CASE("cancelling a parent token cancels the job with cause upstream" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    sandglass::CancelSource parent;
    Gate gate;
    std::latch running{1};
    auto blocker = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto queued = rt.submit({.kind = "q", .parent = parent.token()}, [](JobContext&) {});
    parent.cancel(CancelCause::caller);
    const Outcome q = queued.wait();
    CHECK(q.state == State::cancelled);
    CHECK(q.reason == Reason::cancelled_in_queue);
    CHECK(q.cause == CancelCause::upstream);
    gate.release.count_down();
    blocker.wait();

    sandglass::CancelSource parent2;
    auto running_job = rt.submit({.kind = "r", .parent = parent2.token()}, [&](JobContext& ctx) {
      running.count_down();
      for (;;) ctx.checkpoint();
    });
    running.wait();
    parent2.cancel(CancelCause::deadline);
    const Outcome r = running_job.wait();
    CHECK(r.reason == Reason::cancelled_while_running);
    CHECK(r.cause == CancelCause::upstream);

    auto born_cancelled = rt.submit({.kind = "b", .parent = parent.token()}, [](JobContext&) {});
    CHECK(born_cancelled.wait().cause == CancelCause::upstream);
  }

  TEST_CASE("wait_for gives up after its timeout without an outcome" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto h = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    CHECK_FALSE(h.wait_for(1ms).has_value());
    CHECK_FALSE(h.outcome().has_value());
    gate.release.count_down();
    CHECK(h.wait_for(10s).has_value());
  }

  TEST_CASE("the outcome callback runs exactly once with the same outcome the handle reports" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 2, .capacity = 4}};
    constexpr int kJobs = 200;
    std::vector<std::atomic<int>> calls(kJobs + 1);
    std::latch all{kJobs};
    std::vector<sandglass::JobHandle> handles;
    for (int i = 0; i < kJobs; ++i) {
      handles.push_back(rt.submit({.kind = "k", .budget = 5s}, [](JobContext&) {},
                                  [&](const Outcome& o) {
                                    calls[o.id % (kJobs + 1)].fetch_add(1);
                                    all.count_down();
                                  }));
    }
    all.wait();
    for (auto& h : handles) {
      CHECK(calls[h.id() % (kJobs + 1)].load() == 1);
      CHECK(h.done());
    }
  }

  TEST_CASE("an empty handler, an empty kind or an unknown priority is refused with an exception") {
    Runtime rt{{.workers = 1, .capacity = 1}};
    CHECK_THROWS_AS(rt.submit({.kind = "k"}, sandglass::JobHandler{}), std::invalid_argument);
    CHECK_THROWS_WITH_AS(rt.submit({.budget = 1s}, [](JobContext&) {}),
                         "submit: kind is empty (name what the job does; estimates and limits go "
                         "by it)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(
        rt.submit({.kind = "k", .priority = static_cast<Priority>(7)}, [](JobContext&) {}),
        "submit: priority is not one of critical, high, normal, sheddable", std::invalid_argument);
    CHECK(rt.stats().queued == 0);
  }

  TEST_CASE("inconsistent options are refused with a message naming the field") {
    CHECK_THROWS_WITH_AS(Runtime({.workers = 0}), "RuntimeOptions.workers: must be at least 1",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(Runtime({.workers = 1, .capacity = 0}),
                         "RuntimeOptions.capacity: must be at least 1", std::invalid_argument);
    CHECK_THROWS_WITH_AS(
        Runtime({.workers = 1, .budget = {.default_budget = 1s, .max_budget = 500ms}}),
        "RuntimeOptions.budget.max_budget: must not be less than default_budget",
        std::invalid_argument);
    CHECK_THROWS_WITH_AS(Runtime({.workers = 1, .kind_limits = {{"x", 0}}}),
                         "RuntimeOptions.kind_limits.x: must be at least 1", std::invalid_argument);
  }

  TEST_CASE("shutdown lets queued and running jobs finish within the drain time" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Gate gate;
    auto running = rt.submit({.kind = "block"}, gate.handler());
    gate.started.wait();
    auto queued = rt.submit({.kind = "q"}, [](JobContext& ctx) { ctx.set_result("drained"); });
    // Release the worker only once shutdown has closed admission, so the drain really waits.
    std::thread releaser{[&] {
      for (;;) {
        // A rejection is there at once; an admitted probe just waits in the queue.
        const auto probe = rt.submit({.kind = "probe"}, [](JobContext&) {}).outcome();
        if (probe && probe->reason == Reason::shutting_down) break;
      }
      gate.release.count_down();
    }};
    rt.shutdown(10s);
    releaser.join();
    CHECK(running.wait().state == State::completed);
    const Outcome q = queued.wait();
    INFO("queued job: ", sandglass::to_string(q.state), " ", sandglass::to_string(q.reason), " ", sandglass::to_string(q.cause));
    CHECK(q.result == "drained");
    const auto after = rt.submit({.kind = "late"}, [](JobContext&) {});
    CHECK(after.wait().reason == Reason::shutting_down);
  }

  TEST_CASE("shutdown after the drain time cancels what still waits or runs with cause shutdown" *
            doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::latch running{1};
    auto spinning = rt.submit({.kind = "spin"}, [&](JobContext& ctx) {
      running.count_down();
      for (;;) ctx.checkpoint();
    });
    running.wait();
    std::atomic<bool> ran{false};
    auto queued = rt.submit({.kind = "q"}, [&](JobContext&) { ran = true; });
    rt.shutdown(0s);
    const Outcome s = spinning.wait();
    CHECK(s.state == State::cancelled);
    CHECK(s.reason == Reason::cancelled_while_running);
    CHECK(s.cause == CancelCause::shutdown);
    const Outcome q = queued.wait();
    CHECK(q.state == State::cancelled);
    CHECK(q.reason == Reason::cancelled_in_queue);
    CHECK(q.cause == CancelCause::shutdown);
    CHECK_FALSE(ran.load());
    const auto stats = rt.stats();
    CHECK(stats.submitted == 2);
    CHECK(stats.count(Reason::cancelled_in_queue) == 1);
    CHECK(stats.count(Reason::cancelled_while_running) == 1);
    CHECK(stats.queued == 0);
    CHECK(stats.running == 0);
  }

  TEST_CASE("shutdown is idempotent and may be called from several threads" * doctest::timeout(10)) {
    Runtime rt{{.workers = 2, .capacity = 8}};
    auto h = rt.submit({.kind = "k"}, [](JobContext&) {});
    std::thread other{[&] { rt.shutdown(1s); }};
    rt.shutdown(1s);
    other.join();
    rt.shutdown(0s);
    CHECK(h.wait().state == State::completed);
  }

  TEST_CASE("a handle outlives its runtime and still reports the outcome" * doctest::timeout(10)) {
    sandglass::JobHandle h;
    {
      Runtime rt{{.workers = 1, .capacity = 8}};
      h = rt.submit({.kind = "k"}, [](JobContext& ctx) { ctx.set_result("kept"); });
      h.wait();
    }
    CHECK(h.wait().result == "kept");
    CHECK_FALSE(h.cancel());
  }
}

TEST_SUITE("Runtime under races") {
  TEST_CASE("every job gets exactly one outcome while producers cancel and the runtime shuts down" *
            doctest::timeout(60)) {
    constexpr int kProducers = 3;
    constexpr int kJobsPerProducer = 1500;
    std::mutex mu;
    std::map<sandglass::JobId, int> outcomes;
    std::atomic<int> published{0};
    std::vector<sandglass::JobHandle> handles[kProducers];
    sandglass::CancelSource parent;  // cancelled half-way: reaches queued and running jobs
    {
      Runtime rt{{.workers = 2, .capacity = 64, .budget = {.min_useful = 1ms}}};
      std::barrier start{kProducers + 1};
      std::vector<std::thread> producers;
      for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
          start.arrive_and_wait();
          for (int i = 0; i < kJobsPerProducer; ++i) {
            const auto budget = std::chrono::microseconds{500 + (i * 37 + p * 11) % 20'000};
            sandglass::JobSpec spec{.kind = i % 2 ? "a" : "b",
                                    .priority = static_cast<Priority>(i % 4),
                                    .budget = budget};
            if (i % 5 == 0) spec.parent = parent.token();
            auto h = rt.submit(
                std::move(spec),
                [i](JobContext& ctx) {
                  const auto until = sandglass::Clock::now() + std::chrono::microseconds{i % 300};
                  while (sandglass::Clock::now() < until) ctx.checkpoint();
                  if (i % 97 == 0) throw std::runtime_error{"odd job"};
                },
                [&](const Outcome& o) {
                  std::lock_guard lock{mu};
                  ++outcomes[o.id];
                  published.fetch_add(1);
                });
            if (i % 7 == 0) h.cancel();
            if (i == kJobsPerProducer / 2 && p == 0) parent.cancel(CancelCause::caller);
            handles[p].push_back(std::move(h));
          }
        });
      }
      start.arrive_and_wait();
      for (auto& t : producers) t.join();
      rt.shutdown(5ms);  // some still queued or running: they end with cause shutdown
      const auto stats = rt.stats();
      CHECK(stats.submitted == kProducers * kJobsPerProducer);
      std::uint64_t total = 0;
      for (auto n : stats.outcomes) total += n;
      CHECK(total == stats.submitted);
      CHECK(stats.queued == 0);
      CHECK(stats.running == 0);
    }
    CHECK(published.load() == kProducers * kJobsPerProducer);
    std::lock_guard lock{mu};
    CHECK(outcomes.size() == kProducers * kJobsPerProducer);
    for (const auto& [id, count] : outcomes) CHECK(count == 1);
    for (const auto& per_producer : handles) {
      for (const auto& h : per_producer) {
        REQUIRE(h.done());
        CHECK(outcomes.count(h.id()) == 1);
      }
    }
  }
}

TEST_SUITE("Runtime job records") {
  TEST_CASE("a job's token kept past its outcome and the runtime's end still answers its cause" *
            doctest::timeout(10)) {
    sandglass::CancelToken cancelled_token;
    sandglass::CancelToken shutdown_token;
    sandglass::CancelToken finished_token;
    {
      Runtime rt{{.workers = 2}};
      std::latch running{2};
      auto by_caller = rt.submit({.kind = "k", .budget = 10s}, [&](JobContext& ctx) {
        cancelled_token = ctx.token();
        running.count_down();
        while (!ctx.cancelled()) std::this_thread::yield();
      });
      auto by_shutdown = rt.submit({.kind = "k", .budget = 10s}, [&](JobContext& ctx) {
        shutdown_token = ctx.token();
        running.count_down();
        while (!ctx.cancelled()) std::this_thread::yield();
      });
      running.wait();
      REQUIRE(by_caller.cancel());
      CHECK(by_caller.wait().cause == CancelCause::caller);
      auto finished = rt.submit({.kind = "k", .budget = 10s},
                                [&](JobContext& ctx) { finished_token = ctx.token(); });
      CHECK(finished.wait().reason == Reason::ok);
      rt.shutdown(0ms);
      CHECK(by_shutdown.wait().cause == CancelCause::shutdown);
    }  // the runtime and every handle are gone; the tokens hold the records
    CHECK(cancelled_token.cancelled());
    CHECK(cancelled_token.cause() == CancelCause::caller);
    CHECK(shutdown_token.cause() == CancelCause::shutdown);
    // A job that finished uncancelled accepts no cancellation any more.
    CHECK_FALSE(finished_token.cancelled());
    CHECK(finished_token.can_be_cancelled());
    int calls = 0;
    const auto at_once = cancelled_token.on_cancel([&]() noexcept { ++calls; });
    CHECK(calls == 1);  // cancelled already: runs on registration
    const auto never = finished_token.on_cancel([&]() noexcept { ++calls; });
    CHECK(calls == 1);
    // Copies share the record; the last one to go frees it (ASan reports a leak or a double
    // free otherwise).
    sandglass::CancelToken copy = cancelled_token;
    cancelled_token = {};
    CHECK(copy.cause() == CancelCause::caller);
  }

  TEST_CASE("a child source of a job's token outlives the job and gets the job's cancellation as "
            "upstream" * doctest::timeout(10)) {
    std::optional<sandglass::CancelSource> child;
    std::optional<sandglass::CancelSource> unlinked_child;
    {
      Runtime rt{{.workers = 1}};
      std::latch linked{1};
      auto job = rt.submit({.kind = "k", .budget = 10s}, [&](JobContext& ctx) {
        child.emplace(ctx.token());
        linked.count_down();
        while (!ctx.cancelled()) std::this_thread::yield();
      });
      linked.wait();
      CHECK_FALSE(child->cancelled());
      REQUIRE(job.cancel());
      CHECK(job.wait().cause == CancelCause::caller);
      auto done = rt.submit({.kind = "k", .budget = 10s},
                            [&](JobContext& ctx) { unlinked_child.emplace(ctx.token()); });
      CHECK(done.wait().reason == Reason::ok);
    }
    CHECK(child->cause() == CancelCause::upstream);
    CHECK_FALSE(unlinked_child->cancelled());
    CHECK(unlinked_child->cancel(CancelCause::caller));
    CHECK(unlinked_child->cause() == CancelCause::caller);
  }

  TEST_CASE("handles copied, moved and dropped on several threads see one outcome per job" *
            doctest::timeout(30)) {
    constexpr int kJobs = 2000;
    constexpr int kThreads = 4;
    std::vector<std::vector<sandglass::JobHandle>> per_thread(kThreads);
    std::atomic<int> callbacks{0};
    {
      Runtime rt{{.workers = 2, .capacity = kJobs}};
      std::vector<sandglass::JobHandle> handles;
      for (int i = 0; i < kJobs; ++i) {
        sandglass::JobSpec spec{.kind = i % 3 == 0 ? "a" : "b", .budget = 10s};
        if (i % 7 == 0) spec.idempotency_key = "key-" + std::to_string(i);
        auto h = i % 2 == 0
                     ? rt.submit(std::move(spec), [](JobContext& ctx) { ctx.set_result("r"); },
                                 [&](const Outcome&) { callbacks.fetch_add(1); })
                     : rt.submit(std::move(spec), [](JobContext&) {});
        if (i % 5 == 0) h.cancel();
        if (i % 11 != 0) handles.push_back(h);  // the rest: no handle left at all
        for (int t = 0; t < kThreads; ++t) {
          if ((i + t) % 2 == 0) per_thread[t].push_back(h);
        }
      }
      std::vector<std::jthread> threads;
      std::vector<std::vector<sandglass::JobId>> seen(kThreads);
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (auto& h : per_thread[t]) seen[t].push_back(h.wait().id);
          std::vector<sandglass::JobHandle> moved = std::move(per_thread[t]);
          moved.clear();  // dropped while other threads drop copies of the same jobs
        });
      }
      for (auto& h : handles) CHECK(h.wait().id == h.id());
      threads.clear();
      for (const auto& ids : seen) CHECK(ids.size() == kJobs / 2);
      rt.shutdown(10s);
      CHECK(rt.stats().submitted == kJobs);
    }
    CHECK(callbacks.load() == kJobs / 2);
  }
}

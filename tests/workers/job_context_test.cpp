#include <sandglass/job_context.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::BudgetPolicy;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::Cancelled;
using sandglass::Deadline;
using sandglass::JobContext;

TEST_SUITE("JobContext") {
  TEST_CASE("checkpoint passes until the token is cancelled and then throws with the cause") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{7, "kind", Deadline::never(), source.token(), policy};
    CHECK(ctx.id() == 7);
    CHECK(ctx.kind() == "kind");
    CHECK_NOTHROW(ctx.checkpoint());
    CHECK_FALSE(ctx.cancelled());
    source.cancel(CancelCause::deadline);
    CHECK(ctx.cancelled());
    CHECK(ctx.cause() == CancelCause::deadline);
    try {
      ctx.checkpoint();
      FAIL("checkpoint did not throw");
    } catch (const Cancelled& c) {
      CHECK(c.cause() == CancelCause::deadline);
      CHECK(std::string{c.what()} == "cancelled: deadline exceeded");
    }
  }

  TEST_CASE("after commit checkpoints pass and on_cancel callbacks stay quiet") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    int before_commit_callback = 0;
    const auto reg = ctx.on_cancel([&]() noexcept { ++before_commit_callback; });
    ctx.commit();
    CHECK(ctx.committed());
    source.cancel(CancelCause::caller);
    CHECK_NOTHROW(ctx.checkpoint());
    CHECK(before_commit_callback == 0);
    CHECK(ctx.cancelled());
  }

  TEST_CASE("commit after a cancellation throws and leaves the job uncommitted") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    source.cancel(CancelCause::shutdown);
    CHECK_THROWS_AS(ctx.commit(), Cancelled);
    CHECK_FALSE(ctx.committed());
  }

  TEST_CASE("on_cancel runs at once when registered after the cancellation") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    source.cancel(CancelCause::upstream);
    int calls = 0;
    const auto reg = ctx.on_cancel([&]() noexcept { ++calls; });
    CHECK(calls == 1);
    CHECK_FALSE(reg);  // nothing left to deregister
  }

  TEST_CASE("child_budget keeps the reserve back and fails below the minimum useful budget") {
    const BudgetPolicy policy{.min_useful = 10ms, .reserve = 50ms};
    CancelSource source;
    JobContext roomy{1, "k", Deadline::after(10s), source.token(), policy};
    const auto c = roomy.child_budget({.dependency_cap = 2s});
    CHECK(c.ok());
    CHECK(c.budget == 2s);
    JobContext tight{2, "k", Deadline::after(55ms), source.token(), policy};
    const auto t = tight.child_budget();
    CHECK_FALSE(t.ok());
    CHECK(t.reason == sandglass::Reason::deadline_exceeded_before_dispatch);
  }

  TEST_CASE("sleep_for returns after its time when nothing cancels the job") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    const auto before = sandglass::Clock::now();
    ctx.sleep_for(5ms);
    CHECK(sandglass::Clock::now() - before >= 5ms);
    CHECK_NOTHROW(ctx.sleep_for(-1ms));  // a time in the past returns at once
  }

  TEST_CASE("sleep_for wakes up and throws as soon as another thread cancels the job" *
            doctest::timeout(10)) {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    std::latch asleep{1};
    std::thread canceller{[&] {
      asleep.wait();
      source.cancel(CancelCause::caller);
    }};
    asleep.count_down();
    CHECK_THROWS_AS(ctx.sleep_for(60s), Cancelled);  // the doctest timeout proves it woke
    canceller.join();
    CHECK(ctx.cause() == CancelCause::caller);
  }

  TEST_CASE("sleep_for after the commit point sleeps its whole time despite a cancellation") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    ctx.commit();
    source.cancel(CancelCause::deadline);
    const auto before = sandglass::Clock::now();
    CHECK_NOTHROW(ctx.sleep_for(5ms));
    CHECK(sandglass::Clock::now() - before >= 5ms);
  }

  TEST_CASE("sleep_for on a context without a cancellable token just sleeps") {
    const BudgetPolicy policy;
    JobContext ctx{1, "k", Deadline::never(), sandglass::CancelToken{}, policy};
    const auto before = sandglass::Clock::now();
    ctx.sleep_for(2ms);
    CHECK(sandglass::Clock::now() - before >= 2ms);
  }

  TEST_CASE("on_cancel's registration deregisters the callback when it goes out of scope") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    int scoped_calls = 0;
    int kept_calls = 0;
    {
      const sandglass::CancelRegistration scoped =
          ctx.on_cancel([&]() noexcept { ++scoped_calls; });
      CHECK(scoped);
    }
    const sandglass::CancelRegistration kept = ctx.on_cancel([&]() noexcept { ++kept_calls; });
    std::optional<sandglass::CancelRegistration> reset_early{
        ctx.on_cancel([&]() noexcept { ++scoped_calls; })};
    reset_early->reset();
    source.cancel(CancelCause::caller);
    CHECK(scoped_calls == 0);
    CHECK(kept_calls == 1);
  }

  TEST_CASE("commit racing a cancellation: exactly one wins, and a winning cancellation ran "
            "every on_cancel callback" * doctest::timeout(60)) {
    // Either commit() succeeds and no callback runs, or it throws and each callback runs once.
    const BudgetPolicy policy;
    int commits_won = 0;
    int cancellations_won = 0;
    for (int round = 0; round < 2000; ++round) {
      CancelSource source;
      JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
      std::atomic<int> first{0};
      std::atomic<int> second{0};
      const auto a = ctx.on_cancel([&]() noexcept { first.fetch_add(1); });
      const auto b = ctx.on_cancel([&]() noexcept { second.fetch_add(1); });
      // Both threads spin until both are there (a blocking barrier would wake one of them
      // microseconds late), then one gets a varying head start, so that both win in some rounds.
      std::atomic<int> arrived{0};
      auto start = [&] {
        arrived.fetch_add(1);
        for (unsigned spins = 1; arrived.load() < 2; ++spins) {
          if (spins % 256 == 0) std::this_thread::yield();  // the other one may not run yet
        }
      };
      const int delay = round % 400;
      auto spin = [](int n) {
        std::atomic<int> spun{0};
        while (spun.fetch_add(1, std::memory_order_relaxed) < n) {
        }
      };
      std::thread canceller{[&] {
        start();
        if (delay < 200) spin(delay);
        source.cancel(CancelCause::caller);
      }};
      start();
      if (delay >= 200) spin(delay - 200);
      bool threw = false;
      try {
        ctx.commit();
      } catch (const Cancelled& c) {
        threw = true;
        REQUIRE(c.cause() == CancelCause::caller);
      }
      canceller.join();
      REQUIRE(ctx.committed() == !threw);
      REQUIRE(first.load() == (threw ? 1 : 0));
      REQUIRE(second.load() == (threw ? 1 : 0));
      ++(threw ? cancellations_won : commits_won);
    }
    MESSAGE("commit won " << commits_won << ", cancellation won " << cancellations_won);
  }

  TEST_CASE("commit after a cancellation was recorded but before its callbacks ran throws, and "
            "the callbacks then run") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    int calls = 0;
    const auto reg = ctx.on_cancel([&]() noexcept { ++calls; });
    const auto state = sandglass::CancelAccess::state(source.token());
    REQUIRE(state->signal(CancelCause::deadline));  // as the runtime's timer does
    CHECK_THROWS_AS(ctx.commit(), Cancelled);
    CHECK_FALSE(ctx.committed());
    CHECK(calls == 0);
    state->run_callbacks();  // as the runtime's callback thread does
    CHECK(calls == 1);
  }

  TEST_CASE("commit twice is one commit point, and a later cancellation runs no callback") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{1, "k", Deadline::never(), source.token(), policy};
    int calls = 0;
    const auto reg = ctx.on_cancel([&]() noexcept { ++calls; });
    ctx.commit();
    source.cancel(CancelCause::caller);
    CHECK_NOTHROW(ctx.commit());
    CHECK(ctx.committed());
    CHECK(calls == 0);
  }

  // The cause commit() throws with; none when it passes.
  CancelCause commit_throws(JobContext& ctx) {
    try {
      ctx.commit();
    } catch (const Cancelled& c) {
      return c.cause();
    }
    return CancelCause::none;
  }

  // A recorder that answers as told and remembers what commit() asked it, in order.
  struct ScriptedRecorder final : sandglass::CommitRecorder {
    bool answer = true;
    std::optional<CancelSource*> cancel_on_refusal;
    std::vector<std::string> log;
    bool record(const JobContext& ctx) override {
      log.push_back(std::string{ctx.kind()} + (ctx.committed() ? " committed" : " open"));
      if (!answer && cancel_on_refusal) (*cancel_on_refusal)->cancel(CancelCause::caller);
      return answer;
    }
  };

  TEST_CASE("a recorder is asked before the commit point is passed, once, and a repeated commit "
            "asks no more") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{3, "write", Deadline::never(), source.token(), policy};
    ScriptedRecorder recorder;
    ctx.record_commits_with(&recorder);
    ctx.commit();
    CHECK(ctx.committed());
    ctx.commit();
    CHECK(recorder.log == std::vector<std::string>{"write open"});  // asked while still open
    source.cancel(CancelCause::deadline);
    CHECK_NOTHROW(ctx.checkpoint());  // past the commit point
  }

  TEST_CASE("a refused commit point throws the cancellation the recorder made, runs the job's "
            "on_cancel callbacks, and is never passed later") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{4, "write", Deadline::never(), source.token(), policy};
    ScriptedRecorder recorder;
    recorder.answer = false;
    recorder.cancel_on_refusal = &source;
    ctx.record_commits_with(&recorder);
    int callbacks = 0;
    const auto reg = ctx.on_cancel([&]() noexcept { ++callbacks; });
    CHECK(commit_throws(ctx) == CancelCause::caller);
    CHECK_FALSE(ctx.committed());
    CHECK(callbacks == 1);
    recorder.answer = true;
    CHECK_THROWS_AS(ctx.commit(), Cancelled);
    CHECK(recorder.log.size() == 1);  // a cancelled job does not ask again
    CHECK_THROWS_AS(ctx.checkpoint(), Cancelled);
  }

  TEST_CASE("a cancellation before commit() wins without asking the recorder") {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{5, "write", Deadline::never(), source.token(), policy};
    ScriptedRecorder recorder;
    ctx.record_commits_with(&recorder);
    source.cancel(CancelCause::shutdown);
    CHECK_THROWS_AS(ctx.commit(), Cancelled);
    CHECK(recorder.log.empty());
    CHECK_FALSE(ctx.committed());
  }

  // Records, but the job is cancelled (by its deadline) during the round trip.
  struct CancelledMeanwhile final : sandglass::CommitRecorder {
    CancelSource* source = nullptr;
    bool record(const JobContext&) override {
      source->cancel(CancelCause::deadline);
      return true;
    }
  };

  // commit() with a CancelledMeanwhile recorder, and an on_cancel callback when `with_callback`:
  // the cancellation wins either way.
  void check_cancelled_while_recording(bool with_callback) {
    const BudgetPolicy policy;
    CancelSource source;
    JobContext ctx{6, "write", Deadline::never(), source.token(), policy};
    CancelledMeanwhile recorder;
    recorder.source = &source;
    ctx.record_commits_with(&recorder);
    std::optional<sandglass::CancelRegistration> reg;
    if (with_callback) reg.emplace(ctx.on_cancel([]() noexcept {}));
    CHECK(commit_throws(ctx) == CancelCause::deadline);
    CHECK_FALSE(ctx.committed());
  }

  TEST_CASE("a cancellation that wins while the recorder records leaves the job uncommitted, "
            "with or without on_cancel callbacks") {
    check_cancelled_while_recording(true);
    check_cancelled_while_recording(false);
  }

  TEST_CASE("a refusal with no cancellation yet throws cause caller, and no later commit passes") {
    const BudgetPolicy policy;
    CancelSource other;
    JobContext refused{8, "write", Deadline::never(), other.token(), policy};
    ScriptedRecorder later;  // refuses; the cancellation comes later, from another thread
    later.answer = false;
    refused.record_commits_with(&later);
    CHECK(commit_throws(refused) == CancelCause::caller);
    CHECK_FALSE(refused.committed());
    CHECK_THROWS_AS(refused.commit(), Cancelled);
    CHECK(later.log.size() == 1);
  }
}

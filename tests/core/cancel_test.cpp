#include <sandglass/cancel.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <latch>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

using sandglass::CancelCause;
using sandglass::CancelRegistration;
using sandglass::CancelSource;
using sandglass::CancelToken;

namespace {

constexpr std::array<CancelCause, 4> kCauses = {CancelCause::caller, CancelCause::deadline,
                                                CancelCause::upstream, CancelCause::shutdown};

}  // namespace

TEST_SUITE("CancelToken") {
  TEST_CASE("a new source and its token are not cancelled") {
    const CancelSource source;
    const CancelToken token = source.token();
    CHECK_FALSE(source.cancelled());
    CHECK(source.cause() == CancelCause::none);
    CHECK_FALSE(token.cancelled());
    CHECK(token.cause() == CancelCause::none);
    CHECK(token.can_be_cancelled());
  }

  TEST_CASE("cancelling a source cancels all its tokens with the given cause") {
    for (const CancelCause cause : kCauses) {
      CAPTURE(sandglass::to_string(cause));
      const CancelSource source;
      const CancelToken a = source.token();
      const CancelToken b = source.token();
      CHECK(source.cancel(cause));
      CHECK(source.cancelled());
      CHECK(source.cause() == cause);
      CHECK(a.cancelled());
      CHECK(a.cause() == cause);
      CHECK(b.cause() == cause);
    }
  }

  TEST_CASE("the first cause wins and later cancels return false") {
    const CancelSource source;
    const CancelToken token = source.token();
    CHECK(source.cancel(CancelCause::caller));
    CHECK_FALSE(source.cancel(CancelCause::deadline));
    CHECK_FALSE(source.cancel(CancelCause::shutdown));
    CHECK_FALSE(source.cancel(CancelCause::caller));
    CHECK(source.cause() == CancelCause::caller);
    CHECK(token.cause() == CancelCause::caller);
  }

  TEST_CASE("a copy of a source cancels the same state") {
    const CancelSource source;
    const CancelSource copy = source;
    CHECK(copy.cancel(CancelCause::deadline));
    CHECK(source.cause() == CancelCause::deadline);
    CHECK_FALSE(source.cancel(CancelCause::caller));
  }

  TEST_CASE("cancelling with cause none does nothing") {
    const CancelSource source;
    int calls = 0;
    const CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; });
    CHECK_FALSE(source.cancel(CancelCause::none));
    CHECK_FALSE(source.cancelled());
    CHECK(source.cause() == CancelCause::none);
    CHECK(calls == 0);

    CHECK(source.cancel(CancelCause::shutdown));
    CHECK(source.cause() == CancelCause::shutdown);
    CHECK(calls == 1);
  }

  TEST_CASE("a default token is never cancelled and hands out empty registrations") {
    const CancelToken token;
    CHECK_FALSE(token.can_be_cancelled());
    CHECK_FALSE(token.cancelled());
    CHECK(token.cause() == CancelCause::none);

    int calls = 0;
    CancelRegistration reg = token.on_cancel([&]() noexcept { ++calls; });
    CHECK_FALSE(static_cast<bool>(reg));
    reg.reset();
    CHECK_FALSE(static_cast<bool>(reg));
    CHECK(calls == 0);
  }

  TEST_CASE("a default registration is empty and can be reset") {
    CancelRegistration reg;
    CHECK_FALSE(static_cast<bool>(reg));
    reg.reset();
    CHECK_FALSE(static_cast<bool>(reg));
  }

  TEST_CASE("a callback runs exactly once when the source is cancelled") {
    const CancelSource source;
    int calls = 0;
    const CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; });
    CHECK(static_cast<bool>(reg));
    CHECK(calls == 0);

    CHECK(source.cancel(CancelCause::caller));
    CHECK(calls == 1);
    CHECK_FALSE(source.cancel(CancelCause::deadline));
    CHECK(calls == 1);
  }

  TEST_CASE("every registered callback runs once") {
    const CancelSource source;
    std::array<int, 3> calls{};
    std::vector<CancelRegistration> regs;
    for (int& c : calls) regs.push_back(source.token().on_cancel([&c]() noexcept { ++c; }));
    source.cancel(CancelCause::caller);
    CHECK(calls == std::array<int, 3>{1, 1, 1});
  }

  TEST_CASE("a callback already sees the cancellation's cause when it runs") {
    const CancelSource source;
    const CancelToken token = source.token();
    CancelCause seen = CancelCause::none;
    const CancelRegistration reg = token.on_cancel([&]() noexcept { seen = token.cause(); });
    source.cancel(CancelCause::deadline);
    CHECK(seen == CancelCause::deadline);
  }

  TEST_CASE("a callback registered after cancellation runs at once on the registering thread") {
    const CancelSource source;
    source.cancel(CancelCause::caller);
    int calls = 0;
    std::thread::id ran_on;
    const CancelRegistration reg = source.token().on_cancel([&]() noexcept {
      ++calls;
      ran_on = std::this_thread::get_id();
    });
    CHECK(calls == 1);
    CHECK(ran_on == std::this_thread::get_id());
    CHECK_FALSE(source.cancel(CancelCause::deadline));
    CHECK(calls == 1);
  }

  TEST_CASE("a callback runs on the thread that cancels" * doctest::timeout(5)) {
    const CancelSource source;
    std::thread::id ran_on;
    const CancelRegistration reg =
        source.token().on_cancel([&]() noexcept { ran_on = std::this_thread::get_id(); });
    std::thread canceller{[&] { source.cancel(CancelCause::caller); }};
    const std::thread::id canceller_id = canceller.get_id();
    canceller.join();
    CHECK(ran_on == canceller_id);
    CHECK(ran_on != std::this_thread::get_id());
  }

  TEST_CASE("a callback does not run after its registration is gone") {
    const CancelSource source;
    int calls = 0;
    SUBCASE("destroyed") {
      { const CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; }); }
    }
    SUBCASE("reset") {
      CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; });
      reg.reset();
      CHECK_FALSE(static_cast<bool>(reg));
    }
    SUBCASE("replaced by assignment") {
      CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; });
      reg = CancelRegistration{};
      CHECK_FALSE(static_cast<bool>(reg));
    }
    source.cancel(CancelCause::caller);
    CHECK(source.cause() == CancelCause::caller);
    CHECK(calls == 0);
  }

  TEST_CASE("resetting one registration leaves the others registered") {
    const CancelSource source;
    int first = 0;
    int second = 0;
    CancelRegistration a = source.token().on_cancel([&]() noexcept { ++first; });
    const CancelRegistration b = source.token().on_cancel([&]() noexcept { ++second; });
    a.reset();
    source.cancel(CancelCause::caller);
    CHECK(first == 0);
    CHECK(second == 1);
  }

  TEST_CASE("a moved registration keeps its callback registered") {
    const CancelSource source;
    int calls = 0;
    CancelRegistration original = source.token().on_cancel([&]() noexcept { ++calls; });
    const CancelRegistration moved = std::move(original);
    CHECK(static_cast<bool>(moved));
    source.cancel(CancelCause::caller);
    CHECK(calls == 1);
  }

  TEST_CASE("a registration outlives its source and token without running its callback") {
    int calls = 0;
    CancelRegistration reg;
    {
      const CancelSource source;
      reg = source.token().on_cancel([&]() noexcept { ++calls; });
    }
    CHECK(static_cast<bool>(reg));
    reg.reset();
    CHECK(calls == 0);
  }

  TEST_CASE("a child source sees its parent's cancellation with cause upstream") {
    const CancelSource parent;
    const CancelSource child{parent.token()};
    int calls = 0;
    const CancelRegistration reg = child.token().on_cancel([&]() noexcept { ++calls; });
    CHECK_FALSE(child.cancelled());

    CHECK(parent.cancel(CancelCause::caller));
    CHECK(parent.cause() == CancelCause::caller);
    CHECK(child.cancelled());
    CHECK(child.cause() == CancelCause::upstream);
    CHECK(child.token().cause() == CancelCause::upstream);
    CHECK(calls == 1);
    CHECK_FALSE(child.cancel(CancelCause::caller));
    CHECK(child.cause() == CancelCause::upstream);
  }

  TEST_CASE("a grandchild sees its grandparent's cancellation with cause upstream") {
    const CancelSource root;
    const CancelSource child{root.token()};
    const CancelSource grandchild{child.token()};
    root.cancel(CancelCause::shutdown);
    CHECK(child.cause() == CancelCause::upstream);
    CHECK(grandchild.cause() == CancelCause::upstream);
  }

  TEST_CASE("cancelling a child does not reach its parent") {
    const CancelSource parent;
    const CancelSource child{parent.token()};
    int child_calls = 0;
    int parent_calls = 0;
    const CancelRegistration child_reg =
        child.token().on_cancel([&]() noexcept { ++child_calls; });
    const CancelRegistration parent_reg =
        parent.token().on_cancel([&]() noexcept { ++parent_calls; });

    CHECK(child.cancel(CancelCause::caller));
    CHECK(child.cause() == CancelCause::caller);
    CHECK_FALSE(parent.cancelled());
    CHECK(parent_calls == 0);
    CHECK(child_calls == 1);

    // The parent's later cancellation does not overwrite the child's first cause.
    CHECK(parent.cancel(CancelCause::shutdown));
    CHECK(parent_calls == 1);
    CHECK(child.cause() == CancelCause::caller);
    CHECK(child_calls == 1);
  }

  TEST_CASE("a child of an already cancelled parent is cancelled at once with cause upstream") {
    const CancelSource parent;
    parent.cancel(CancelCause::deadline);
    const CancelSource child{parent.token()};
    CHECK(child.cancelled());
    CHECK(child.cause() == CancelCause::upstream);
    CHECK_FALSE(child.cancel(CancelCause::caller));

    int calls = 0;
    const CancelRegistration reg = child.token().on_cancel([&]() noexcept { ++calls; });
    CHECK(calls == 1);
  }

  TEST_CASE("a child of a default token is cancelled only by itself") {
    const CancelSource child{CancelToken{}};
    CHECK(child.token().can_be_cancelled());
    CHECK_FALSE(child.cancelled());
    CHECK(child.cancel(CancelCause::caller));
    CHECK(child.cause() == CancelCause::caller);
  }

  TEST_CASE("a child token outliving its source still sees the parent's cancellation") {
    const CancelSource parent;
    CancelToken child_token;
    { child_token = CancelSource{parent.token()}.token(); }
    CHECK(parent.cancel(CancelCause::caller));
    CHECK(child_token.cause() == CancelCause::upstream);
  }

  TEST_CASE("a parent cancelled after its child is gone cancels only itself") {
    const CancelSource parent;
    int calls = 0;
    {
      const CancelSource child{parent.token()};
      const CancelRegistration reg = child.token().on_cancel([&]() noexcept { ++calls; });
    }
    CHECK(parent.cancel(CancelCause::caller));
    CHECK(parent.cause() == CancelCause::caller);
    CHECK(calls == 0);
  }

  TEST_CASE("a parent token outlives its source through a child") {
    std::optional<CancelSource> parent{std::in_place};
    const CancelSource child{parent->token()};
    parent.reset();
    CHECK_FALSE(child.cancelled());
    CHECK(child.cancel(CancelCause::deadline));
    CHECK(child.cause() == CancelCause::deadline);
  }

  TEST_CASE("concurrent cancels: exactly one wins and every callback runs exactly once" *
            doctest::timeout(5)) {
    constexpr std::size_t kThreads = 8;
    constexpr int kRounds = 50;
    for (int round = 0; round < kRounds; ++round) {
      CAPTURE(round);
      const CancelSource source;
      std::array<std::atomic<int>, 3> calls{};
      std::vector<CancelRegistration> regs;
      for (std::atomic<int>& c : calls) {
        regs.push_back(source.token().on_cancel(
            [&c]() noexcept { c.fetch_add(1, std::memory_order_relaxed); }));
      }
      std::atomic<int> winners{0};
      std::atomic<std::size_t> winner_index{kThreads};
      std::barrier start{static_cast<std::ptrdiff_t>(kThreads)};
      std::vector<std::thread> threads;
      for (std::size_t i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
          start.arrive_and_wait();
          if (source.cancel(kCauses[i % kCauses.size()])) {
            winners.fetch_add(1, std::memory_order_relaxed);
            winner_index.store(i, std::memory_order_relaxed);
          }
        });
      }
      for (std::thread& t : threads) t.join();

      CHECK(winners.load() == 1);
      REQUIRE(winner_index.load() < kThreads);
      CHECK(source.cause() == kCauses[winner_index.load() % kCauses.size()]);
      for (const std::atomic<int>& c : calls) CHECK(c.load() == 1);
    }
  }

  TEST_CASE("a callback registered while another thread cancels runs exactly once" *
            doctest::timeout(5)) {
    constexpr int kRounds = 200;
    for (int round = 0; round < kRounds; ++round) {
      CAPTURE(round);
      const CancelSource source;
      const CancelToken token = source.token();
      std::atomic<int> calls{0};
      std::barrier start{2};
      std::thread canceller{[&] {
        start.arrive_and_wait();
        source.cancel(CancelCause::caller);
      }};
      start.arrive_and_wait();
      const CancelRegistration reg =
          token.on_cancel([&]() noexcept { calls.fetch_add(1, std::memory_order_relaxed); });
      canceller.join();
      CHECK(calls.load() == 1);
    }
  }

  TEST_CASE("a parent cancelled while children are created reaches every child exactly once" *
            doctest::timeout(5)) {
    constexpr int kRounds = 100;
    constexpr int kChildren = 4;
    for (int round = 0; round < kRounds; ++round) {
      CAPTURE(round);
      const CancelSource parent;
      std::atomic<int> calls{0};
      std::barrier start{2};
      std::thread canceller{[&] {
        start.arrive_and_wait();
        parent.cancel(CancelCause::shutdown);
      }};
      start.arrive_and_wait();
      std::vector<CancelSource> children;
      std::vector<CancelRegistration> regs;
      for (int i = 0; i < kChildren; ++i) {
        children.emplace_back(parent.token());
        regs.push_back(children.back().token().on_cancel(
            [&]() noexcept { calls.fetch_add(1, std::memory_order_relaxed); }));
      }
      canceller.join();
      CHECK(calls.load() == kChildren);
      for (const CancelSource& child : children) CHECK(child.cause() == CancelCause::upstream);
    }
  }

  TEST_CASE("resetting a registration waits for its callback running on another thread" *
            doctest::timeout(5)) {
    const CancelSource source;
    std::latch entered{1};
    std::latch release{1};
    int written = 0;  // not atomic: reset() must order the callback's write before our read
    CancelRegistration reg = source.token().on_cancel([&]() noexcept {
      entered.count_down();
      release.wait();
      written = 42;
    });
    std::thread canceller{[&] { source.cancel(CancelCause::caller); }};
    entered.wait();
    release.count_down();
    reg.reset();  // blocks until the callback has returned
    CHECK(written == 42);
    canceller.join();
  }

  TEST_CASE("a token seen cancelled on another thread shows what was written before cancel" *
            doctest::timeout(5)) {
    const CancelSource source;
    const CancelToken token = source.token();
    int payload = 0;  // not atomic: published by cancel(), acquired by cancelled()
    std::thread canceller{[&] {
      payload = 7;
      source.cancel(CancelCause::caller);
    }};
    while (!token.cancelled()) std::this_thread::yield();
    CHECK(payload == 7);
    canceller.join();
  }

  TEST_CASE("cause names round-trip through to_string and cancel_cause_from_string") {
    const std::array<std::pair<CancelCause, std::string_view>, 5> names = {{
        {CancelCause::none, "none"},
        {CancelCause::caller, "caller"},
        {CancelCause::deadline, "deadline"},
        {CancelCause::upstream, "upstream"},
        {CancelCause::shutdown, "shutdown"},
    }};
    for (const auto& entry : names) {
      // Not a structured binding: CAPTURE's lambda captures `name`, which clang 14 refuses.
      const CancelCause cause = entry.first;
      const std::string_view name = entry.second;
      CAPTURE(name);
      CHECK(sandglass::to_string(cause) == name);
      CHECK(sandglass::cancel_cause_from_string(name) == cause);
    }
  }

  TEST_CASE("an unknown cause name or value is not mistaken for a cause") {
    CHECK_FALSE(sandglass::cancel_cause_from_string("").has_value());
    CHECK_FALSE(sandglass::cancel_cause_from_string("Caller").has_value());
    CHECK_FALSE(sandglass::cancel_cause_from_string("caller ").has_value());
    CHECK_FALSE(sandglass::cancel_cause_from_string("unknown").has_value());
    CHECK(sandglass::to_string(static_cast<CancelCause>(200)) == "unknown");
  }
}

TEST_SUITE("CancelState") {
  using sandglass::CancelAccess;

  TEST_CASE("signal records the cause at once and run_callbacks runs the callbacks later") {
    CancelSource source;
    const auto state = CancelAccess::state(source.token());
    int calls = 0;
    const CancelRegistration before = source.token().on_cancel([&]() noexcept { ++calls; });
    CHECK(state->signal(CancelCause::deadline));
    CHECK(source.token().cancelled());
    CHECK(source.cause() == CancelCause::deadline);
    CHECK(calls == 0);
    CHECK_FALSE(state->signal(CancelCause::caller));   // the first cause wins
    CHECK_FALSE(source.cancel(CancelCause::caller));   // and a full cancel runs nothing more
    CHECK(calls == 0);
    int late_calls = 0;  // registered after the signal: runs at once, here
    const CancelRegistration after = source.token().on_cancel([&]() noexcept { ++late_calls; });
    CHECK(late_calls == 1);
    state->run_callbacks();
    CHECK(calls == 1);
    CHECK(late_calls == 1);
  }

  TEST_CASE("close refuses every later cancellation and reads as never cancelled") {
    CancelSource source;
    const auto state = CancelAccess::state(source.token());
    int calls = 0;
    const CancelRegistration reg = source.token().on_cancel([&]() noexcept { ++calls; });
    CHECK(state->close() == CancelCause::none);
    CHECK_FALSE(source.cancel(CancelCause::caller));
    CHECK_FALSE(state->signal(CancelCause::deadline));
    CHECK_FALSE(source.cancelled());
    CHECK(source.cause() == CancelCause::none);
    CHECK(calls == 0);
    const CancelRegistration late = source.token().on_cancel([&]() noexcept { ++calls; });
    CHECK(calls == 0);  // a closed state never runs callbacks
    CHECK(state->close() == CancelCause::none);
  }

  TEST_CASE("close after a cancellation returns its cause and changes nothing") {
    CancelSource source;
    const auto state = CancelAccess::state(source.token());
    CHECK(source.cancel(CancelCause::upstream));
    CHECK(state->close() == CancelCause::upstream);
    CHECK(source.cause() == CancelCause::upstream);
  }

  TEST_CASE("close racing a cancellation: exactly one wins" * doctest::timeout(30)) {
    for (int round = 0; round < 500; ++round) {
      CancelSource source;
      const auto state = CancelAccess::state(source.token());
      std::atomic<int> calls{0};
      const CancelRegistration reg =
          source.token().on_cancel([&]() noexcept { calls.fetch_add(1); });
      std::barrier start{2};
      bool cancel_won = false;
      std::thread canceller{[&] {
        start.arrive_and_wait();
        cancel_won = source.cancel(CancelCause::caller);
      }};
      start.arrive_and_wait();
      const CancelCause seen = state->close();
      canceller.join();
      REQUIRE(cancel_won == (seen == CancelCause::caller));
      REQUIRE(calls.load() == (cancel_won ? 1 : 0));
    }
  }
}

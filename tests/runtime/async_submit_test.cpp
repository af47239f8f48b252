// Runtime::async_submit with Asio completion tokens.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

TEST_SUITE("Runtime::async_submit") {
  TEST_CASE("a plain callback completes on the io_context's thread" * doctest::timeout(10)) {
    asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto guard = asio::make_work_guard(io);
    std::optional<Outcome> got;
    std::thread::id completed_on;
    rt.async_submit({.kind = "k"}, [](JobContext& ctx) { ctx.set_result("cb"); },
                    asio::bind_executor(io, [&](Outcome o) {
                      got = std::move(o);
                      completed_on = std::this_thread::get_id();
                      guard.reset();
                    }));
    io.run();
    REQUIRE(got.has_value());
    CHECK(got->result == "cb");
    CHECK(completed_on == std::this_thread::get_id());
  }

  TEST_CASE("use_future yields the outcome" * doctest::timeout(10)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::future<Outcome> f =
        rt.async_submit({.kind = "k"}, [](JobContext& ctx) { ctx.set_result("future"); },
                        asio::use_future);
    const Outcome o = f.get();
    CHECK(o.state == State::completed);
    CHECK(o.result == "future");
  }

  TEST_CASE("use_awaitable yields the outcome in a coroutine and rejections too" *
            doctest::timeout(10)) {
    asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::optional<Outcome> ok;
    std::optional<Outcome> rejected;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          sandglass::JobSpec fine{.kind = "k"};
          ok = co_await rt.async_submit(fine, [](JobContext&) {}, asio::use_awaitable);
          sandglass::JobSpec too_small{.kind = "k", .budget = 0ms};
          rejected = co_await rt.async_submit(std::move(too_small), [](JobContext&) {},
                                              asio::use_awaitable);
        },
        asio::detached);
    io.run();
    REQUIRE(ok.has_value());
    CHECK(ok->state == State::completed);
    REQUIRE(rejected.has_value());
    CHECK(rejected->reason == Reason::budget_too_small);
  }

  TEST_CASE("a cancellation emitted on the bound slot cancels the job with cause caller" *
            doctest::timeout(10)) {
    asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto guard = asio::make_work_guard(io);  // the outcome is posted from another thread
    asio::cancellation_signal signal;
    std::latch running{1};
    std::optional<Outcome> got;
    rt.async_submit({.kind = "spin"},
                    [&](JobContext& ctx) {
                      running.count_down();
                      for (;;) ctx.checkpoint();
                    },
                    asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](Outcome o) {
                                                   got = std::move(o);
                                                   guard.reset();
                                                 })));
    running.wait();
    signal.emit(asio::cancellation_type::terminal);  // on this thread, which owns the io_context
    io.run();
    REQUIRE(got.has_value());
    CHECK(got->state == State::cancelled);
    CHECK(got->cause == CancelCause::caller);
  }

  // GCC 12 mis-copies an aggregate temporary written inside a co_await expression (it
  // destroys a stale bitwise copy): with a JobSpec holding std::strings this form would free
  // the SSO buffer of `kind` ("free(): invalid pointer") or free a longer string twice. The
  // spec is a trivially copyable JobSpecRef, so no copy can go stale.
  TEST_CASE("co_await async_submit with a braced JobSpec of designated initializers is safe" *
            doctest::timeout(20)) {
    asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 2, .capacity = 32}};
    CancelSource parent;
    std::vector<Outcome> got;
    std::optional<Outcome> cancelled;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int round = 0; round < 3; ++round) {
            got.push_back(co_await rt.async_submit(
                {.kind = "x", .priority = Priority::high, .budget = 200ms},
                [](JobContext& ctx) { ctx.set_result(std::string{ctx.kind()}); },
                asio::use_awaitable));
            got.push_back(co_await rt.async_submit(
                {.kind = "a kind name longer than the small-string buffer",
                 .priority = Priority::critical,
                 .budget = 2s,
                 .parent = parent.token(),
                 .idempotency_key = "an idempotency key longer than sixteen bytes"},
                [](JobContext& ctx) { ctx.set_result(std::string{ctx.idempotency_key()}); },
                asio::use_awaitable));
            got.push_back(co_await rt.async_submit(
                {.kind = "sheddable", .priority = Priority::sheddable, .budget = 0ms},
                [](JobContext&) {}, asio::use_awaitable));
            got.push_back(co_await rt.async_submit(
                {.kind = "deadline", .deadline = sandglass::Deadline::after(5s)},
                [](JobContext& ctx) { ctx.set_result(std::to_string(ctx.remaining() > 1s)); },
                asio::use_awaitable));
          }
          // A parent token cancels through the braced spec too.
          cancelled = co_await rt.async_submit(
              {.kind = "child", .priority = Priority::normal, .budget = 5s, .parent = parent.token()},
              [&parent](JobContext& ctx) {
                parent.cancel(CancelCause::caller);
                ctx.checkpoint();
              },
              asio::use_awaitable);
        },
        asio::detached);
    io.run();
    REQUIRE(got.size() == 12);
    for (std::size_t i = 0; i < got.size(); i += 4) {
      CHECK(got[i].state == State::completed);
      CHECK(got[i].kind == "x");
      CHECK(got[i].result == "x");
      CHECK(got[i + 1].state == State::completed);
      CHECK(got[i + 1].kind == "a kind name longer than the small-string buffer");
      CHECK(got[i + 1].result == "an idempotency key longer than sixteen bytes");
      CHECK(got[i + 2].reason == Reason::budget_too_small);
      CHECK(got[i + 2].kind == "sheddable");
      CHECK(got[i + 3].state == State::completed);
      CHECK(got[i + 3].result == "1");
    }
    REQUIRE(cancelled.has_value());
    CHECK(cancelled->state == State::cancelled);
    CHECK(cancelled->cause == CancelCause::upstream);
  }

  TEST_CASE("a named JobSpec and a named move-only handler pass through co_await unchanged" *
            doctest::timeout(10)) {
    asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::optional<Outcome> got;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          const sandglass::JobSpec spec{.kind = "named", .priority = Priority::high, .budget = 5s,
                                        .idempotency_key = "k-17"};
          auto handler = [owned = std::make_unique<std::string>("owned")](JobContext& ctx) {
            ctx.set_result(*owned + ":" + std::string{ctx.idempotency_key()});
          };
          got = co_await rt.async_submit(spec, std::move(handler), asio::use_awaitable);
        },
        asio::detached);
    io.run();
    REQUIRE(got.has_value());
    CHECK(got->kind == "named");
    CHECK(got->result == "owned:k-17");
  }
}

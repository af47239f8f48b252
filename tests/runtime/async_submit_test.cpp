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
#include <optional>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::Outcome;
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
          // Named specs: GCC 12 mis-copies braced temporaries inside a co_await expression.
          sandglass::JobSpec fine{.kind = "k"};
          ok = co_await rt.async_submit(std::move(fine), [](JobContext&) {}, asio::use_awaitable);
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
}

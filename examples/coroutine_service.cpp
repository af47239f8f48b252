// A Boost.Asio service that runs its jobs on a sandglass::Runtime from coroutines: kinds,
// priorities and budgets of several sorts, a job cancelled through its completion's
// cancellation slot, a call-out that checks its child budget and fails with JobFailed.
#include <sandglass/sandglass.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <optional>

using namespace std::chrono_literals;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::State;

int main() {
  boost::asio::io_context io;  // outlives the runtime, whose workers post completions to it
  sandglass::Runtime rt{{.workers = 2, .capacity = 64, .budget = {.reserve = 50ms}}};
  int unexpected = 0;
  const auto report = [&](const char* what, const Outcome& o, State state, Reason reason) {
    std::printf("%-7s state=%s reason=%s cause=%s\n", what, sandglass::to_string(o.state).data(),
                sandglass::to_string(o.reason).data(), sandglass::to_string(o.cause).data());
    if (o.state != state || o.reason != reason) ++unexpected;
  };

  // A long, low-priority job that a cancellation slot stops once it runs.
  boost::asio::cancellation_signal stop;
  std::optional<Outcome> crunch;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        crunch = co_await rt.async_submit(
            {.kind = "crunch", .priority = Priority::sheddable, .budget = 10s},
            [&](sandglass::JobContext& ctx) {
              // Running: the io thread emits the cancellation (a signal is not thread-safe).
              boost::asio::post(io, [&] { stop.emit(boost::asio::cancellation_type::terminal); });
              ctx.sleep_for(10s);  // wakes when cancelled
            },
            boost::asio::bind_cancellation_slot(stop.slot(), boost::asio::use_awaitable));
      },
      boost::asio::detached);

  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        Outcome resize = co_await rt.async_submit(
            {.kind = "resize", .priority = Priority::high, .budget = 200ms},
            [](sandglass::JobContext& ctx) {
              ctx.checkpoint();
              ctx.set_result("resized");
            },
            boost::asio::use_awaitable);
        report("resize", resize, State::completed, Reason::ok);

        // Too little budget left to call the export service: the job fails, it does not
        // pretend to have completed.
        Outcome exported = co_await rt.async_submit(
            {.kind = "export", .priority = Priority::normal, .budget = 40ms},
            [](sandglass::JobContext& ctx) {
              auto child = ctx.child_budget({.dependency_cap = 300ms});  // remaining - reserve
              if (!child.ok()) {
                throw sandglass::JobFailed{child.reason, "no budget left for the export call"};
              }
              ctx.set_result("exported");
            },
            boost::asio::use_awaitable);
        report("export", exported, State::failed, Reason::deadline_exceeded_before_dispatch);

        Outcome ping = co_await rt.async_submit(
            {.kind = "ping", .priority = Priority::critical, .budget = 0ms},
            [](sandglass::JobContext&) {}, boost::asio::use_awaitable);
        report("ping", ping, State::rejected, Reason::budget_too_small);
      },
      boost::asio::detached);

  io.run();
  if (!crunch || crunch->cause != sandglass::CancelCause::caller) {
    ++unexpected;
  } else {
    report("crunch", *crunch, State::cancelled, Reason::cancelled_while_running);
  }
  rt.shutdown(1s);
  return unexpected == 0 ? 0 : 1;
}

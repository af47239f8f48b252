// An awaitable job whose executor never runs its start (nobody runs the executor, or its thread
// returned from run() before there was work) cannot hang the runtime: its deadline, its caller
// and a shutdown end it as if it had never left the queue, and its run slot is free again.
#include <sandglass/awaitable_job.hpp>
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>

#include <atomic>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {

// A coroutine that counts its starts.
auto counting(std::atomic<int>& started) {
  return [&started](JobContext&) -> asio::awaitable<void> {
    started.fetch_add(1);
    co_return;
  };
}

}  // namespace

TEST_SUITE("Runtime awaitable handlers whose executor does not run them") {
  TEST_CASE("a job its executor never starts ends expired_in_queue at its deadline and frees its slot" *
            doctest::timeout(30)) {
    asio::io_context never_run;
    std::atomic<int> started{0};
    SUBCASE("nobody runs the executor") {}
    SUBCASE("its thread ran it before there was work, without a work guard") {
      std::thread{[&] { never_run.run(); }}.join();
    }
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto stranded = rt.submit({.kind = "stranded", .budget = 50ms},
                              sandglass::awaitable_job(never_run.get_executor(), counting(started)));
    const Outcome o = stranded.wait();
    CHECK(o.state == State::expired);
    CHECK(o.reason == Reason::expired_in_queue);
    CHECK(o.cause == CancelCause::deadline);
    // The only slot is free again: a blocking job runs.
    auto next = rt.submit({.kind = "next", .budget = 10s}, [](JobContext&) {});
    CHECK(next.wait().reason == Reason::ok);
    rt.shutdown(0ms);
    // The executor runs the start late: it does nothing.
    never_run.restart();
    never_run.run();
    CHECK(started.load() == 0);
  }

  TEST_CASE("shutdown and the destructor end an unstarted job after their timeout, cause shutdown" *
            doctest::timeout(30)) {
    asio::io_context never_run;
    std::atomic<int> started{0};
    sandglass::JobHandle job;
    SUBCASE("shutdown") {
      Runtime rt{{.workers = 2, .capacity = 8}};
      job = rt.submit({.kind = "stranded", .budget = 60s},
                      sandglass::awaitable_job(never_run.get_executor(), counting(started)));
      rt.shutdown(20ms);
    }
    SUBCASE("the destructor") {
      Runtime rt{{.workers = 2, .capacity = 8}};
      job = rt.submit({.kind = "stranded", .budget = 60s},
                      sandglass::awaitable_job(never_run.get_executor(), counting(started)));
    }
    const Outcome o = job.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_in_queue);
    CHECK(o.cause == CancelCause::shutdown);
    never_run.run();
    CHECK(started.load() == 0);
  }

  TEST_CASE("a caller's cancel ends a job its executor has not started" * doctest::timeout(30)) {
    asio::io_context never_run;
    std::atomic<int> started{0};
    Runtime rt{{.workers = 1, .capacity = 8}};
    auto job = rt.submit({.kind = "stranded", .budget = 60s},
                         sandglass::awaitable_job(never_run.get_executor(), counting(started)));
    // Once a worker launched it, it holds the slot: its executor is all it waits for.
    while (!job.progress().started_at) std::this_thread::yield();
    CHECK(job.cancel());
    const Outcome o = job.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.reason == Reason::cancelled_in_queue);
    CHECK(o.cause == CancelCause::caller);
    rt.shutdown(0ms);
    never_run.run();
    CHECK(started.load() == 0);
  }
}

TEST_SUITE("JobFailed") {
  TEST_CASE("JobFailed with a reason that is not a failure fails the job as handler_error naming it" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 2, .capacity = 8}};
    for (Reason reason : {Reason::ok, Reason::queue_full, Reason::shed, Reason::expired_in_queue,
                          Reason::cancelled_while_running}) {
      CAPTURE(sandglass::to_string(reason));
      auto job = rt.submit({.kind = "misuse", .budget = 10s},
                           [reason](JobContext&) { throw sandglass::JobFailed{reason, "why"}; });
      const Outcome o = job.wait();
      CHECK(o.state == State::failed);
      CHECK(o.reason == Reason::handler_error);
      CHECK(o.error.find(std::string{"reason "} + std::string{sandglass::to_string(reason)} + ",") !=
            std::string::npos);
      CHECK(o.error.find("why") != std::string::npos);
    }
    auto kept = rt.submit({.kind = "gave-up", .budget = 10s},
                          [](JobContext&) { throw sandglass::JobFailed{Reason::retry_skipped_budget, "why"}; });
    CHECK(kept.wait().reason == Reason::retry_skipped_budget);
    CHECK(kept.wait().error == "why");
  }
}

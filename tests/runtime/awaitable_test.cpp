// Awaitable handlers (awaitable_job.hpp): a coroutine on a named executor that holds a run slot,
// not a worker thread, and sees its deadline or cancellation as a terminal Asio cancellation.
#include <sandglass/awaitable_job.hpp>
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <atomic>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::JobFailed;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {

// An io_context run by its own thread. Declare it before the Runtime: a shutdown waits for the
// coroutines, which finish on this thread.
class IoThread {
 public:
  IoThread() : guard_{asio::make_work_guard(io_)}, thread_{[this] { io_.run(); }} {}
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;
  ~IoThread() {
    guard_.reset();
    thread_.join();
  }
  asio::io_context::executor_type executor() { return io_.get_executor(); }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
};

// Awaits a timer an hour away; counts an aborted wait in `aborted` and rethrows it.
asio::awaitable<void> await_far_timer(std::atomic<int>& aborted) {
  asio::steady_timer timer{co_await asio::this_coro::executor, 1h};
  try {
    co_await timer.async_wait(asio::use_awaitable);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) aborted.fetch_add(1);
    throw;
  }
}

// A coroutine factory is not a blocking handler: submit refuses it at compile time.
template <typename F>
concept Submittable = requires(Runtime& rt, F f) { rt.submit(sandglass::JobSpec{.kind = "k"}, std::move(f)); };
constexpr auto kCoroutineFactory = [](JobContext&) -> asio::awaitable<void> { co_return; };
constexpr auto kBlocking = [](JobContext&) {};
static_assert(!Submittable<decltype(kCoroutineFactory)>);
static_assert(Submittable<decltype(kBlocking)>);

}  // namespace

TEST_SUITE("Runtime awaitable handlers") {
  TEST_CASE("an awaitable job with a delay and a retry runs its coroutine again after a failure" *
            doctest::timeout(30)) {
    IoThread io;
    sandglass::RuntimeOptions options{.workers = 2};
    options.retry_random = [] { return 0.0; };
    Runtime rt{options};
    std::atomic<int> calls{0};
    const Outcome o =
        rt.submit({.kind = "await-retry", .budget = 5s,
                   .retry = sandglass::JobRetry{.max_attempts = 3, .backoff = 1ms}, .delay = 2ms},
                  sandglass::awaitable_job(io.executor(),
                                           [&calls](JobContext&) -> asio::awaitable<void> {
                                             if (calls.fetch_add(1) == 0) throw std::runtime_error{"first"};
                                             co_return;
                                           }))
            .wait();
    CHECK(o.state == sandglass::State::completed);
    REQUIRE(o.attempts.size() == 2);
    CHECK(o.attempts[0].reason == Reason::handler_error);
    CHECK(o.attempts[0].error == "first");
    CHECK(calls == 2);
    rt.shutdown(1s);
  }

  TEST_CASE("a thousand awaiting jobs on two slots each get exactly one outcome, and those that ran were cancelled by their deadline" *
            doctest::timeout(120)) {
    IoThread io;
    Runtime rt{{.workers = 2, .capacity = 64}};
    constexpr int kJobs = 1000;
    constexpr int kWave = 4;  // two run (the slots), two wait or are refused
    std::vector<std::atomic<int>> outcomes_of(kJobs);
    std::array<std::atomic<int>, sandglass::kReasonCount> by_reason{};
    std::atomic<int> cancelled_by_deadline{0};
    std::atomic<int> aborted{0};
    constexpr std::array<Priority, kWave> kPriorities{Priority::critical, Priority::high,
                                                      Priority::normal, Priority::sheddable};
    for (int wave = 0; wave < kJobs / kWave; ++wave) {
      // Budgets differ by wave and within it: the two with the longer budget start when the
      // first two are cancelled, and run until their own deadline. Each wave has a kind of its
      // own: runs cut by their deadline teach an estimate as long as the budget, which would
      // (rightly) make admission refuse the next wave of the same kind as implausible.
      const auto budget = std::array{5ms, 7ms, 9ms}[static_cast<std::size_t>(wave % 3)];
      const std::string kind = "await-" + std::to_string(wave);
      std::latch wave_done{kWave};
      for (int i = 0; i < kWave; ++i) {
        const int job = wave * kWave + i;
        rt.submit({.kind = kind, .priority = kPriorities[static_cast<std::size_t>(i)],
                   .budget = i < 2 ? budget : 2 * budget},
                  sandglass::awaitable_job(io.executor(),
                                           [&aborted](JobContext&) -> asio::awaitable<void> {
                                             co_await await_far_timer(aborted);
                                           }),
                  [&, job](const Outcome& o) {
                    outcomes_of[static_cast<std::size_t>(job)].fetch_add(1);
                    by_reason[static_cast<std::size_t>(o.reason)].fetch_add(1);
                    if (o.reason == Reason::cancelled_while_running && o.cause == CancelCause::deadline) {
                      cancelled_by_deadline.fetch_add(1);
                    }
                    wave_done.count_down();
                  });
      }
      wave_done.wait();
    }
    rt.shutdown(1s);
    for (int job = 0; job < kJobs; ++job) {
      CAPTURE(job);
      CHECK(outcomes_of[static_cast<std::size_t>(job)].load() == 1);
    }
    auto count = [&](Reason r) { return by_reason[static_cast<std::size_t>(r)].load(); };
    const int ran = count(Reason::cancelled_while_running);
    const int left_queue = count(Reason::expired_in_queue) + count(Reason::too_late_to_start);
    const int refused = count(Reason::deadline_implausible);
    MESSAGE("cancelled while running: ", ran, ", left the queue: ", left_queue, ", refused: ", refused);
    CHECK(ran + left_queue + refused == kJobs);  // no other outcome
    CHECK(ran > 0);  // usually all: slots are free when a wave starts (timing is not asserted)
    CHECK(cancelled_by_deadline.load() == ran);
    CHECK(aborted.load() == ran);  // each saw its wait end with operation_aborted
    CHECK(rt.stats().submitted == static_cast<std::uint64_t>(kJobs));
  }

  TEST_CASE("an awaiting job holds its run slot but no worker thread, and a handle cancels it" *
            doctest::timeout(30)) {
    IoThread io;
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::atomic<int> aborted{0};
    std::atomic<bool> a_finished{false};
    std::latch awaiting{1};
    std::thread::id ran_on;
    auto a = rt.submit({.kind = "await", .budget = 60s},
                       sandglass::awaitable_job(io.executor(), [&](JobContext& ctx) -> asio::awaitable<void> {
                         ran_on = std::this_thread::get_id();
                         awaiting.count_down();
                         try {
                           co_await await_far_timer(aborted);
                         } catch (...) {
                           a_finished = true;
                           CHECK(ctx.cause() == CancelCause::caller);
                           throw;
                         }
                       }));
    awaiting.wait();
    CHECK(ran_on == io.id());         // on the named executor, not on the worker
    CHECK(rt.stats().running == 1);   // yet it counts as running: it holds the only slot
    // A blocking job waits for the slot: it cannot start before the coroutine has finished.
    auto b = rt.submit({.kind = "block", .priority = Priority::critical, .budget = 60s},
                       [&](JobContext& ctx) { ctx.set_result(a_finished ? "after" : "before"); });
    CHECK(a.cancel());
    const Outcome oa = a.wait();
    CHECK(oa.state == State::cancelled);
    CHECK(oa.reason == Reason::cancelled_while_running);
    CHECK(oa.cause == CancelCause::caller);
    CHECK(aborted.load() == 1);
    const Outcome ob = b.wait();
    CHECK(ob.reason == Reason::ok);
    CHECK(ob.result == "after");
    CHECK_FALSE(a.cancel());  // it has ended
  }

  TEST_CASE("an awaitable handler completes, fails by an exception or by JobFailed, as a blocking one does" *
            doctest::timeout(30)) {
    IoThread io;
    Runtime rt{{.workers = 2, .capacity = 8}};
    auto owned = std::make_unique<std::string>("moved in");  // the factory may be move-only
    auto done = rt.submit({.kind = "ok", .budget = 10s},
                          sandglass::awaitable_job(io.executor(),
                                                   [owned = std::move(owned)](JobContext& ctx) -> asio::awaitable<void> {
                                                     asio::steady_timer t{co_await asio::this_coro::executor, 1ms};
                                                     co_await t.async_wait(asio::use_awaitable);
                                                     ctx.set_result(*owned);
                                                   }));
    auto threw = rt.submit({.kind = "throws", .priority = Priority::high, .budget = 10s},
                           sandglass::awaitable_job(io.executor(), [](JobContext&) -> asio::awaitable<void> {
                             co_await asio::this_coro::executor;
                             throw std::runtime_error{"boom"};
                           }));
    auto gave_up = rt.submit({.kind = "gives-up", .priority = Priority::sheddable, .budget = 10s},
                             sandglass::awaitable_job(io.executor(), [](JobContext&) -> asio::awaitable<void> {
                               co_await asio::this_coro::executor;
                               throw JobFailed{Reason::breaker_open, "dependency down"};
                             }));
    const Outcome od = done.wait();
    CHECK(od.state == State::completed);
    CHECK(od.reason == Reason::ok);
    CHECK(od.result == "moved in");
    const Outcome ot = threw.wait();
    CHECK(ot.state == State::failed);
    CHECK(ot.reason == Reason::handler_error);
    CHECK(ot.error == "boom");
    const Outcome og = gave_up.wait();
    CHECK(og.state == State::failed);
    CHECK(og.reason == Reason::breaker_open);
    CHECK(og.error == "dependency down");
    CHECK(rt.stats().running == 0);
  }

  TEST_CASE("shutdown cancels awaiting jobs and waits for their coroutines" * doctest::timeout(30)) {
    IoThread io;
    std::atomic<int> aborted{0};
    std::latch both_awaiting{2};
    std::vector<sandglass::JobHandle> jobs;
    {
      Runtime rt{{.workers = 2, .capacity = 8}};
      for (int i = 0; i < 2; ++i) {
        jobs.push_back(rt.submit({.kind = i == 0 ? "a" : "b", .budget = 60s},
                                 sandglass::awaitable_job(io.executor(), [&](JobContext&) -> asio::awaitable<void> {
                                   both_awaiting.count_down();
                                   co_await await_far_timer(aborted);
                                 })));
      }
      both_awaiting.wait();
      // Both slots are taken: this one waits in the queue.
      jobs.push_back(rt.submit({.kind = "c", .budget = 60s},
                               sandglass::awaitable_job(io.executor(), [](JobContext&) -> asio::awaitable<void> {
                                 co_return;
                               })));
      rt.shutdown(0ms);
      CHECK(rt.stats().running == 0);
    }
    for (int i = 0; i < 2; ++i) {
      const Outcome o = *jobs[static_cast<std::size_t>(i)].outcome();  // published before shutdown returned
      CHECK(o.reason == Reason::cancelled_while_running);
      CHECK(o.cause == CancelCause::shutdown);
    }
    const Outcome queued = *jobs[2].outcome();
    CHECK(queued.reason == Reason::cancelled_in_queue);
    CHECK(queued.cause == CancelCause::shutdown);
    CHECK(aborted.load() == 2);
  }
}

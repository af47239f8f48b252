// Where the Runtime runs user code, and what user code may do to the runtime and its handles:
// no callback on the timer thread, shutdown refused from inside, handles that outlive it, and
// commit points in the outcome.
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::JobContext;
using sandglass::JobHandle;
using sandglass::Outcome;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {

// A flag one thread sets and another waits for, with a bound: a test that would deadlock on a
// broken runtime fails instead of hanging.
class Flag {
 public:
  void set() {
    { std::lock_guard lock{mu_}; set_ = true; }
    changed_.notify_all();
  }
  // True if set within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock lock{mu_};
    return changed_.wait_for(lock, timeout, [&] { return set_; });
  }
  bool is_set() {
    std::lock_guard lock{mu_};
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool set_ = false;
};

std::string this_thread_name() {
#if defined(__linux__)
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
#else
  return {};
#endif
}

}  // namespace

TEST_SUITE("Runtime callbacks") {
  TEST_CASE("a deadline callback that blocks does not delay another job's deadline signal" *
            doctest::timeout(30)) {
    // A's on_cancel callback waits until B's handler has seen B's own (later) deadline. With
    // the callback on the timer thread, B's deadline would never be signalled while it waits.
    Runtime rt{{.workers = 2, .capacity = 8}};
    Flag b_signalled;
    std::atomic<bool> a_saw_b{false};
    std::latch a_callback_ran{1};
    JobHandle a = rt.submit({.kind = "a", .budget = 20ms}, [&](JobContext& ctx) {
      const auto reg = ctx.on_cancel([&]() noexcept {
        a_saw_b = b_signalled.wait_for(10s);
        a_callback_ran.count_down();
      });
      while (!ctx.cancelled()) std::this_thread::yield();
      a_callback_ran.wait();
    });
    JobHandle b = rt.submit({.kind = "b", .budget = 40ms}, [&](JobContext& ctx) {
      while (!ctx.cancelled()) std::this_thread::yield();  // a checkpoint loop, no sleep
      b_signalled.set();
    });
    const Outcome ob = b.wait();
    const Outcome oa = a.wait();
    CHECK(a_saw_b.load());
    CHECK(oa.cause == CancelCause::deadline);
    CHECK(ob.cause == CancelCause::deadline);
  }

  TEST_CASE("an expired job's slow outcome callback does not delay a running job's deadline" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    Flag release_blocker;
    Flag running_signalled;
    std::atomic<bool> saw_signal{false};
    // The only worker runs `running` (deadline 40 ms); `queued` expires in the queue at 10 ms
    // and its outcome callback waits for `running`'s deadline signal.
    std::latch started{1};
    JobHandle running = rt.submit({.kind = "run", .budget = 40ms}, [&](JobContext& ctx) {
      started.count_down();
      while (!ctx.cancelled()) std::this_thread::yield();
      running_signalled.set();
    });
    started.wait();
    JobHandle queued = rt.submit(
        {.kind = "queued", .budget = 10ms}, [](JobContext&) {},
        [&](const Outcome&) { saw_signal = running_signalled.wait_for(10s); });
    CHECK(running.wait().cause == CancelCause::deadline);
    const Outcome oq = queued.wait();
    CHECK(oq.reason == Reason::expired_in_queue);
    rt.shutdown(10s);  // the callback thread finished the outcome callback
    CHECK(saw_signal.load());
  }

#if defined(__linux__)
  TEST_CASE("deadline callbacks, expired outcomes and overrun reports run on the callback "
            "thread, not the timer's" * doctest::timeout(30)) {
    std::mutex mu;
    std::vector<std::string> overrun_threads;
    std::latch overrun_reported{1};
    Runtime rt{{.workers = 1,
                .capacity = 8,
                .overrun_after = 1ms,
                .on_overrun = [&](const sandglass::Overrun&) {
                  std::lock_guard lock{mu};
                  overrun_threads.push_back(this_thread_name());
                  overrun_reported.count_down();
                }}};
    std::string cancel_thread;
    std::string expired_thread;
    std::latch cancel_ran{1};
    std::latch started{1};
    JobHandle slow = rt.submit({.kind = "slow", .budget = 20ms}, [&](JobContext& ctx) {
      const auto reg = ctx.on_cancel([&]() noexcept {
        cancel_thread = this_thread_name();
        cancel_ran.count_down();
      });
      started.count_down();
      cancel_ran.wait();
      overrun_reported.wait();  // keeps running past its deadline: an overrun
    });
    started.wait();
    JobHandle expired = rt.submit({.kind = "queued", .budget = 5ms}, [](JobContext&) {},
                                  [&](const Outcome&) { expired_thread = this_thread_name(); });
    CHECK(slow.wait().cause == CancelCause::deadline);
    CHECK(expired.wait().reason == Reason::expired_in_queue);
    rt.shutdown(10s);
    CHECK(cancel_thread == "sg-callbacks");
    CHECK(expired_thread == "sg-callbacks");
    REQUIRE(overrun_threads.size() == 1);
    CHECK(overrun_threads[0] == "sg-callbacks");
  }

  TEST_CASE("the timer thread runs with a 10 microsecond timer slack" * doctest::timeout(30)) {
    Runtime rt{{.workers = 1}};
    int timers = 0;
    // The timer names itself as it starts; look until it has (bounded, no sleep).
    for (int scan = 0; scan < 100'000 && timers == 0; ++scan) {
      for (const auto& task : std::filesystem::directory_iterator{"/proc/self/task"}) {
        // /proc/TID/, not /proc/self/task/TID/: only the former has timerslack_ns.
        const std::filesystem::path thread = "/proc" / task.path().filename();
        std::ifstream comm{thread / "comm"};
        std::string name;
        std::getline(comm, name);
        if (name != "sg-timer") continue;
        ++timers;
        std::ifstream slack_file{thread / "timerslack_ns"};
        long slack_ns = -1;
        slack_file >> slack_ns;
        CHECK(slack_ns == 10'000);
      }
      if (timers == 0) std::this_thread::yield();
    }
    CHECK(timers == 1);
  }
#endif

  TEST_CASE("shutdown from a handler throws a clear error and the runtime goes on" *
            doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::string error;
    rt.submit({.kind = "k"}, [&](JobContext&) {
        try {
          rt.shutdown(0s);
        } catch (const std::logic_error& e) {
          error = e.what();
        }
      }).wait();
    CHECK(error ==
          "Runtime::shutdown called from a handler or callback of the same Runtime: it would "
          "wait for that code to return; call it from another thread");
    CHECK(rt.submit({.kind = "k"}, [](JobContext& ctx) { ctx.set_result("still"); })
              .wait()
              .result == "still");
  }

  TEST_CASE("shutdown from an outcome callback throws a clear error, on a worker and on the "
            "submitter" * doctest::timeout(30)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    std::atomic<int> refused{0};
    auto try_shutdown = [&](const Outcome&) {
      try {
        rt.shutdown(0s);
      } catch (const std::logic_error&) {
        refused.fetch_add(1);
      }
    };
    JobHandle ran = rt.submit({.kind = "k"}, [](JobContext&) {}, try_shutdown);
    ran.wait();
    // A rejection's callback runs inside submit, on this thread.
    JobHandle rejected = rt.submit({.kind = "k", .budget = 1ns}, [](JobContext&) {}, try_shutdown);
    CHECK(rejected.outcome()->reason == Reason::budget_too_small);
    rt.shutdown(10s);  // the worker's callback has returned once shutdown did
    CHECK(refused.load() == 2);
    // Another runtime's shutdown from inside this one's handler is fine.
    Runtime outer{{.workers = 1}};
    auto inner = std::make_unique<Runtime>(sandglass::RuntimeOptions{.workers = 1});
    outer.submit({.kind = "k"}, [&](JobContext&) { inner->shutdown(1s); }).wait();
    CHECK(inner->submit({.kind = "k"}, [](JobContext&) {}).wait().reason ==
          Reason::shutting_down);
  }

  TEST_CASE("the outcome says whether the job passed its commit point" * doctest::timeout(30)) {
    Runtime rt{{.workers = 2, .capacity = 8}};
    const Outcome plain = rt.submit({.kind = "k"}, [](JobContext&) {}).wait();
    CHECK(plain.state == State::completed);
    CHECK_FALSE(plain.committed);
    const Outcome failed_after = rt.submit({.kind = "k"}, [](JobContext& ctx) {
                                     ctx.commit();
                                     throw std::runtime_error{"lost the reply"};
                                   }).wait();
    CHECK(failed_after.state == State::failed);
    CHECK(failed_after.committed);
    std::latch started{1};
    JobHandle refused = rt.submit({.kind = "k"}, [&](JobContext& ctx) {
      started.count_down();
      while (!ctx.cancelled()) std::this_thread::yield();
      ctx.commit();  // throws: the cancellation came first
    });
    started.wait();
    CHECK(refused.cancel());
    const Outcome o = refused.wait();
    CHECK(o.state == State::cancelled);
    CHECK(o.cause == CancelCause::caller);
    CHECK_FALSE(o.committed);
  }
}

TEST_SUITE("JobHandle::cancel") {
  TEST_CASE("cancel answers true exactly when the outcome shows that cancellation, also right "
            "after the handler returned" * doctest::timeout(60)) {
    Runtime rt{{.workers = 1, .capacity = 8}};
    int cancelled = 0;
    for (int round = 0; round < 500; ++round) {
      std::atomic<bool> returning{false};
      JobHandle h = rt.submit({.kind = "k"}, [&](JobContext&) { returning = true; });
      // Spin rather than block: the cancel should land as close to the return as it can.
      for (unsigned spins = 1; !returning.load(); ++spins) {
        if (spins % 1024 == 0) std::this_thread::yield();
      }
      const bool said = h.cancel();  // the handler returned or is about to
      const Outcome o = h.wait();
      REQUIRE(said == (o.cause == CancelCause::caller));
      if (said) {
        REQUIRE(o.reason == Reason::completed_after_cancel);
        ++cancelled;
      }
      REQUIRE_FALSE(h.cancel());  // finished
    }
    MESSAGE(cancelled << " of 500 cancels came before the handler returned");
  }

  TEST_CASE("a handle and an async slot cancel nothing after the runtime is gone" *
            doctest::timeout(30)) {
    asio::io_context io;
    asio::cancellation_signal signal;
    std::optional<Outcome> completed;
    JobHandle queued;
    {
      Runtime rt{{.workers = 1, .capacity = 8}};
      std::latch started{1};
      JobHandle blocker = rt.submit({.kind = "block"}, [&](JobContext& ctx) {
        started.count_down();
        ctx.sleep_for(1h);  // until shutdown cancels it
      });
      started.wait();
      queued = rt.submit({.kind = "queued"}, [](JobContext&) {});
      rt.async_submit({.kind = "async"}, [](JobContext&) {},
                      asio::bind_cancellation_slot(
                          signal.slot(), asio::bind_executor(io, [&](Outcome o) {
                            completed = std::move(o);
                          })));
    }  // the destructor cancels all three (cause shutdown)
    CHECK_FALSE(queued.cancel());
    CHECK(queued.outcome()->cause == CancelCause::shutdown);
    signal.emit(asio::cancellation_type::terminal);  // the slot still holds its handler
    io.run();
    REQUIRE(completed.has_value());
    CHECK(completed->cause == CancelCause::shutdown);
  }

  TEST_CASE("cancel racing the runtime's destruction touches nothing that is gone" *
            doctest::timeout(120)) {
    // Run under ASan: a cancel that reached the runtime after its destructor returned would
    // be a use after free.
    for (int round = 0; round < 300; ++round) {
      auto rt = std::make_unique<Runtime>(sandglass::RuntimeOptions{.workers = 1, .capacity = 8});
      std::latch started{1};
      JobHandle blocker = rt->submit({.kind = "block"}, [&](JobContext& ctx) {
        started.count_down();
        ctx.sleep_for(1h);
      });
      started.wait();
      JobHandle queued = rt->submit({.kind = "queued"}, [](JobContext&) {});
      std::barrier go{2};
      bool said = false;
      std::thread canceller{[&] {
        go.arrive_and_wait();
        said = queued.cancel();
      }};
      go.arrive_and_wait();
      rt.reset();
      canceller.join();
      const Outcome o = *queued.outcome();
      REQUIRE(o.reason == Reason::cancelled_in_queue);
      REQUIRE(said == (o.cause == CancelCause::caller));
      REQUIRE_FALSE(queued.cancel());
    }
  }

  TEST_CASE("a cancellation emitted on the slot while async_submit is still submitting is kept" *
            doctest::timeout(120)) {
    // The handler emits at once, on its worker, often before async_submit has returned.
    asio::io_context io;  // outlives the runtime: a worker may still be inside post (runtime.hpp)
    Runtime rt{{.workers = 2, .capacity = 8}};
    for (int round = 0; round < 300; ++round) {
      asio::cancellation_signal signal;
      std::optional<Outcome> completed;
      rt.async_submit({.kind = "k", .budget = 10s},
                      [&](JobContext& ctx) {
                        signal.emit(asio::cancellation_type::terminal);
                        ctx.sleep_for(5s);  // cut short by the cancellation
                      },
                      asio::bind_cancellation_slot(
                          signal.slot(), asio::bind_executor(io, [&](Outcome o) {
                            completed = std::move(o);
                          })));
      io.restart();  // the last round's guard going stopped it
      auto work = asio::make_work_guard(io);
      while (!completed) io.run_one();  // blocks until a handler ran
      REQUIRE(completed.has_value());
      REQUIRE(completed->state == State::cancelled);
      REQUIRE(completed->cause == CancelCause::caller);
    }
  }
}

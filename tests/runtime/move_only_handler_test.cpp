// Handlers that own move-only state: a handler capturing a std::unique_ptr compiles and runs
// (JobHandler is a MoveOnlyFunction, not a std::function).
#include <sandglass/runtime.hpp>

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

using namespace std::chrono_literals;
using sandglass::JobContext;
using sandglass::JobHandler;
using sandglass::Outcome;
using sandglass::Priority;
using sandglass::Reason;
using sandglass::Runtime;
using sandglass::State;

namespace {

// Owns a resource and counts how many are alive, so a test sees the handler release it.
struct Resource {
  static inline std::atomic<int> alive{0};
  explicit Resource(std::string value) : text{std::move(value)} { ++alive; }
  Resource(const Resource&) = delete;
  ~Resource() { --alive; }
  std::string text;
};

}  // namespace

TEST_SUITE("Runtime handlers") {
  TEST_CASE("a handler owning a unique_ptr runs to completion and releases it" *
            doctest::timeout(10)) {
    REQUIRE(Resource::alive == 0);
    {
      Runtime rt{{.workers = 2, .capacity = 16}};
      auto owned = std::make_unique<Resource>("owned");
      auto h = rt.submit({.kind = "move_only", .priority = Priority::high, .budget = 5s},
                         [r = std::move(owned)](JobContext& ctx) {
                           ctx.checkpoint();
                           ctx.set_result(r->text);
                         });
      // A copyable handler of another kind beside it.
      auto plain = rt.submit({.kind = "plain", .budget = 5s},
                             [](JobContext& ctx) { ctx.set_result("plain"); });
      const Outcome o = h.wait();
      CHECK(o.state == State::completed);
      CHECK(o.reason == Reason::ok);
      CHECK(o.result == "owned");
      CHECK(plain.wait().result == "plain");
      CHECK(Resource::alive == 0);  // the runtime released the handler when the job ended
      rt.shutdown(1s);
    }
    CHECK(Resource::alive == 0);
  }

  TEST_CASE("a rejected move-only handler is released without running" * doctest::timeout(10)) {
    REQUIRE(Resource::alive == 0);
    Runtime rt{{.workers = 1, .capacity = 4}};
    bool ran = false;
    JobHandler handler{[r = std::make_unique<Resource>("never"), &ran](JobContext&) { ran = true; }};
    const Outcome o = rt.submit({.kind = "move_only", .budget = 0ms}, std::move(handler)).wait();
    CHECK(o.reason == Reason::budget_too_small);
    CHECK_FALSE(ran);
    CHECK(Resource::alive == 0);
  }

  TEST_CASE("async_submit takes a move-only handler with use_future and use_awaitable" *
            doctest::timeout(10)) {
    boost::asio::io_context io;  // outlives the runtime, whose workers post to it
    Runtime rt{{.workers = 2, .capacity = 16}};
    auto future = rt.async_submit(
        {.kind = "future", .priority = Priority::normal, .budget = 5s},
        [r = std::make_unique<Resource>("future")](JobContext& ctx) { ctx.set_result(r->text); },
        boost::asio::use_future);
    std::optional<Outcome> awaited;
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          // The lambda is named first: GCC 12 mis-copies a lambda with non-trivially copyable
          // captures written inside a co_await expression (see Runtime::async_submit).
          JobHandler handler{[r = std::make_unique<Resource>("awaited")](JobContext& ctx) {
            ctx.set_result(r->text);
          }};
          awaited = co_await rt.async_submit(
              {.kind = "awaited", .priority = Priority::critical, .budget = 5s},
              std::move(handler), boost::asio::use_awaitable);
        },
        boost::asio::detached);
    io.run();
    CHECK(future.get().result == "future");
    REQUIRE(awaited.has_value());
    CHECK(awaited->state == State::completed);
    CHECK(awaited->result == "awaited");
    CHECK(Resource::alive == 0);
  }
}

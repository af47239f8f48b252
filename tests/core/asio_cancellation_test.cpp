#include <sandglass/asio_cancellation.hpp>

#include <doctest/doctest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <latch>
#include <optional>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using sandglass::AsioCancellation;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::CancelToken;

namespace {

// Cancels `source` from a new thread once `ctx` runs handlers, so the cancellation arrives while
// the test thread is inside `ctx.run()`. Joins the thread on destruction.
class CancelFromAnotherThread {
 public:
  CancelFromAnotherThread(asio::io_context& ctx, CancelSource source) {
    asio::post(ctx, [this] { running_.count_down(); });
    thread_ = std::thread{[this, source] {
      running_.wait();
      source.cancel(CancelCause::caller);
    }};
  }
  CancelFromAnotherThread(const CancelFromAnotherThread&) = delete;
  CancelFromAnotherThread& operator=(const CancelFromAnotherThread&) = delete;
  ~CancelFromAnotherThread() { thread_.join(); }

  std::thread::id id() const noexcept { return thread_.get_id(); }

 private:
  std::latch running_{1};
  std::thread thread_;
};

// What a completion handler saw.
struct Completion {
  std::optional<error_code> ec;
  std::size_t bytes = 0;
  std::thread::id thread;
  int calls = 0;
};

// Starts a read on `reader` bound to `bridge`, cancels `source` from another thread while the
// test thread runs `ctx`, and returns what the read's handler saw. Should the read never
// complete, a watchdog stops `ctx` after 10 s so that the test fails instead of hanging.
template <typename Socket>
Completion read_cancelled_from_another_thread(asio::io_context& ctx, Socket& reader,
                                              CancelSource source, AsioCancellation& bridge) {
  asio::steady_timer watchdog{ctx, 10s};
  watchdog.async_wait([&](error_code ec) {
    if (!ec) ctx.stop();
  });
  std::array<char, 16> buffer{};
  Completion done;
  reader.async_read_some(asio::buffer(buffer),
                         asio::bind_cancellation_slot(bridge.slot(),
                                                      [&](error_code ec, std::size_t n) {
                                                        done.ec = ec;
                                                        done.bytes = n;
                                                        done.thread = std::this_thread::get_id();
                                                        ++done.calls;
                                                        watchdog.cancel();
                                                      }));
  {
    const CancelFromAnotherThread canceller{ctx, source};
    ctx.run();
  }
  return done;
}

}  // namespace

TEST_SUITE("AsioCancellation") {
  TEST_CASE("a timer wait completes with operation_aborted when the token is cancelled on "
            "another thread" *
            doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    AsioCancellation bridge{source.token(), ctx.get_executor()};
    asio::steady_timer timer{ctx, 10s};
    Completion done;
    timer.async_wait(asio::bind_cancellation_slot(bridge.slot(), [&](error_code ec) {
      done.ec = ec;
      done.thread = std::this_thread::get_id();
      ++done.calls;
    }));
    CHECK_FALSE(bridge.cancelled());

    std::thread::id canceller_id;
    {
      const CancelFromAnotherThread canceller{ctx, source};
      canceller_id = canceller.id();
      ctx.run();
    }

    REQUIRE(done.ec.has_value());
    CHECK(*done.ec == asio::error::operation_aborted);
    CHECK(done.calls == 1);
    CHECK(done.thread == std::this_thread::get_id());
    CHECK(done.thread != canceller_id);
    CHECK(bridge.cancelled());
    CHECK(source.cause() == CancelCause::caller);
  }

  TEST_CASE("a timer wait completes with operation_aborted when the token was cancelled before "
            "the context runs" *
            doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    AsioCancellation bridge{source.token(), ctx.get_executor()};
    asio::steady_timer timer{ctx, 10s};
    std::optional<error_code> result;
    timer.async_wait(
        asio::bind_cancellation_slot(bridge.slot(), [&](error_code ec) { result = ec; }));
    source.cancel(CancelCause::deadline);
    CHECK_FALSE(bridge.cancelled());  // the emission waits for the executor

    ctx.run();
    REQUIRE(result.has_value());
    CHECK(*result == asio::error::operation_aborted);
    CHECK(bridge.cancelled());
  }

  TEST_CASE("a timer wait without cancellation completes normally" * doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    CancelToken token;
    SUBCASE("a token that could be cancelled") { token = source.token(); }
    SUBCASE("a default token") {}
    AsioCancellation bridge{token, ctx.get_executor()};
    asio::steady_timer timer{ctx};
    timer.expires_after(0s);
    Completion done;
    timer.async_wait(asio::bind_cancellation_slot(bridge.slot(), [&](error_code ec) {
      done.ec = ec;
      ++done.calls;
    }));

    ctx.run();
    REQUIRE(done.ec.has_value());
    CHECK_FALSE(done.ec->failed());
    CHECK(*done.ec == error_code{});
    CHECK(done.calls == 1);
    CHECK_FALSE(bridge.cancelled());
  }

  TEST_CASE("a socket read completes with operation_aborted when the token is cancelled on "
            "another thread" *
            doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    AsioCancellation bridge{source.token(), ctx.get_executor()};
    Completion done;

    SUBCASE("a TCP connection over loopback") {
      asio::ip::tcp::acceptor acceptor{
          ctx, asio::ip::tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0}};
      asio::ip::tcp::socket client{ctx};
      asio::ip::tcp::socket server{ctx};
      client.connect(acceptor.local_endpoint());
      acceptor.accept(server);
      done = read_cancelled_from_another_thread(ctx, server, source, bridge);
    }
    SUBCASE("a local stream socket pair") {
      asio::local::stream_protocol::socket a{ctx};
      asio::local::stream_protocol::socket b{ctx};
      asio::local::connect_pair(a, b);
      done = read_cancelled_from_another_thread(ctx, a, source, bridge);
    }

    REQUIRE(done.ec.has_value());
    CHECK(*done.ec == asio::error::operation_aborted);
    CHECK(done.bytes == 0);
    CHECK(done.calls == 1);
    CHECK(done.thread == std::this_thread::get_id());
    CHECK(bridge.cancelled());
  }

  TEST_CASE("a cancellation while no operation is bound is remembered by cancelled()" *
            doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    SUBCASE("cancelled after the bridge was built") {
      AsioCancellation bridge{source.token(), ctx.get_executor()};
      source.cancel(CancelCause::caller);
      CHECK_FALSE(bridge.cancelled());
      CHECK(ctx.run() == 1u);  // the posted emission
      CHECK(bridge.cancelled());
    }
    SUBCASE("cancelled before the bridge was built") {
      source.cancel(CancelCause::caller);
      AsioCancellation bridge{source.token(), ctx.get_executor()};
      CHECK_FALSE(bridge.cancelled());
      CHECK(ctx.run() == 1u);
      CHECK(bridge.cancelled());
    }
  }

  TEST_CASE("a destroyed bridge posts nothing when its token is cancelled later" *
            doctest::timeout(5)) {
    asio::io_context ctx;
    const CancelSource source;
    { const AsioCancellation bridge{source.token(), ctx.get_executor()}; }
    CHECK(source.cancel(CancelCause::caller));
    CHECK(ctx.run() == 0u);
  }
}

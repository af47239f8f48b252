#include "daemon/kinds/sql/sql_pool.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <latch>
#include <optional>
#include <thread>

using namespace std::chrono_literals;
using sandglass::CancelCause;
using sandglass::CancelSource;
using sandglass::Deadline;
using sandglass::daemon::SqlPool;

TEST_SUITE("SqlPool") {
  TEST_CASE("a free slot is leased without a connection and comes back when the lease ends") {
    SqlPool pool{1};
    CancelSource job;
    std::optional<SqlPool::Lease> lease = pool.acquire_until(Deadline::after(10s), job.token());
    REQUIRE(lease.has_value());
    CHECK(lease->connection() == nullptr);
    CHECK(pool.in_use() == 1);
    CHECK(pool.open() == 1);
    lease.reset();
    CHECK(pool.in_use() == 0);
    CHECK(pool.open() == 0);  // a slot that never got a connection is not kept
  }

  TEST_CASE("a wait for a slot ends at its deadline when every slot is leased") {
    SqlPool pool{1};
    CancelSource job;
    const std::optional<SqlPool::Lease> held = pool.acquire_until(Deadline::after(10s), job.token());
    REQUIRE(held.has_value());
    CHECK_FALSE(pool.acquire_until(Deadline::after(20ms), job.token()).has_value());
    CHECK(pool.in_use() == 1);
  }

  TEST_CASE("a wait for a slot ends when its job is cancelled" * doctest::timeout(30)) {
    SqlPool pool{1};
    CancelSource holder;
    const std::optional<SqlPool::Lease> held = pool.acquire_until(Deadline::after(10s), holder.token());
    REQUIRE(held.has_value());
    CancelSource waiter;
    std::latch started{1};
    bool got = true;
    std::thread t{[&] {
      started.count_down();
      // Either the cancellation comes first and the wait never starts, or it wakes the wait.
      got = pool.acquire_until(Deadline::never(), waiter.token()).has_value();
    }};
    started.wait();
    waiter.cancel(CancelCause::caller);
    t.join();
    CHECK_FALSE(got);
    CHECK(pool.in_use() == 1);
  }

  TEST_CASE("a slot given back goes to a waiting job" * doctest::timeout(30)) {
    SqlPool pool{1};
    CancelSource holder;
    std::optional<SqlPool::Lease> held = pool.acquire_until(Deadline::after(10s), holder.token());
    REQUIRE(held.has_value());
    CancelSource waiter;
    std::latch started{1};
    bool got = false;
    std::thread t{[&] {
      started.count_down();
      got = pool.acquire_until(Deadline::after(20s), waiter.token()).has_value();
    }};
    started.wait();
    held.reset();
    t.join();
    CHECK(got);
    CHECK(pool.in_use() == 0);
  }
}

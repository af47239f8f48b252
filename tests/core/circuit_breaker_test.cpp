#include <sandglass/circuit_breaker.hpp>

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <latch>
#include <string_view>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using sandglass::BreakerState;
using sandglass::CircuitBreaker;
using sandglass::Duration;
using sandglass::TimePoint;

namespace {

constexpr Duration kTick = 1s;

// Time that moves only when the test says so, in ticks.
struct TickClock {
  TimePoint now{};
  void at(int tick) { now = TimePoint{} + tick * kTick; }
  CircuitBreaker::NowFunction function() {
    return [this] { return now; };
  }
};

// The breaker of timeout-retry-breaker.de.txt: THRESHOLD = 3, COOLDOWN = 4 ticks.
constexpr sandglass::CircuitBreakerOptions kReference{.failure_threshold = 3,
                                                     .cooldown = 4 * kTick};

}  // namespace

TEST_SUITE("CircuitBreaker") {
  TEST_CASE("the breaker over 12 ticks reproduces the reference trace") {
    // The provider is down until tick 7 and up from then on. Reference output:
    //   Tick 0: Fehler → CLOSED ... Tick 10: ok → CLOSED, Tick 11: ok → CLOSED
    //   Aufrufe beim Anbieter: 6 von 12
    struct Step {
      std::string_view result;
      BreakerState state;
      bool probe;
      Duration retry_after;  // for a rejection
    };
    constexpr std::array<Step, 12> kTrace{{
        {"failure", BreakerState::closed, false, {}},  // tick 0
        {"failure", BreakerState::closed, false, {}},  // tick 1
        {"failure", BreakerState::open, false, {}},    // tick 2: third failure in a row
        {"rejected", BreakerState::open, false, 3 * kTick},  // tick 3
        {"rejected", BreakerState::open, false, 2 * kTick},  // tick 4
        {"rejected", BreakerState::open, false, 1 * kTick},  // tick 5
        {"failure", BreakerState::open, true, {}},     // tick 6: the probe fails
        {"rejected", BreakerState::open, false, 3 * kTick},  // tick 7: the provider is back
        {"rejected", BreakerState::open, false, 2 * kTick},  // tick 8
        {"rejected", BreakerState::open, false, 1 * kTick},  // tick 9
        {"ok", BreakerState::closed, true, {}},        // tick 10: the probe succeeds
        {"ok", BreakerState::closed, false, {}},       // tick 11
    }};

    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    int provider_calls = 0;
    for (int tick = 0; tick < 12; ++tick) {
      CAPTURE(tick);
      clock.at(tick);
      const bool provider_up = tick >= 7;
      std::string_view result = "rejected";
      CircuitBreaker::Permit permit = breaker.try_acquire();
      const Step& expected = kTrace[static_cast<std::size_t>(tick)];
      CHECK(permit.is_probe() == expected.probe);
      CHECK(permit.retry_after() == expected.retry_after);
      if (permit) {
        ++provider_calls;
        if (provider_up) {
          permit.record_success();
          result = "ok";
        } else {
          permit.record_failure();
          result = "failure";
        }
      }
      CHECK(result == expected.result);
      CHECK(breaker.state() == expected.state);
    }
    CHECK(provider_calls == 6);
  }

  TEST_CASE("a success while closed starts the count of consecutive failures again") {
    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    breaker.try_acquire().record_failure();
    breaker.try_acquire().record_failure();
    breaker.try_acquire().record_success();
    breaker.try_acquire().record_failure();
    breaker.try_acquire().record_failure();
    CHECK(breaker.state() == BreakerState::closed);
    breaker.try_acquire().record_failure();
    CHECK(breaker.state() == BreakerState::open);
  }

  TEST_CASE("an open breaker rejects at once until the cooldown has passed") {
    TickClock clock;
    CircuitBreaker breaker{{.failure_threshold = 1, .cooldown = 4 * kTick}, clock.function()};
    breaker.try_acquire().record_failure();
    REQUIRE(breaker.state() == BreakerState::open);

    clock.now = TimePoint{} + 4 * kTick - 1ns;
    const CircuitBreaker::Permit rejected = breaker.try_acquire();
    CHECK_FALSE(rejected.allowed());
    CHECK(rejected.retry_after() == 1ns);

    clock.at(4);
    const CircuitBreaker::Permit probe = breaker.try_acquire();
    CHECK(probe.allowed());
    CHECK(probe.is_probe());
    CHECK(probe.retry_after() == Duration::zero());
    CHECK(breaker.state() == BreakerState::half_open);
  }

  TEST_CASE("while the probe is out every other caller is rejected with the cooldown as retry after") {
    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    for (int i = 0; i < 3; ++i) breaker.try_acquire().record_failure();
    clock.at(4);
    CircuitBreaker::Permit probe = breaker.try_acquire();
    REQUIRE(probe.is_probe());

    const CircuitBreaker::Permit other = breaker.try_acquire();
    CHECK_FALSE(other.allowed());
    CHECK_FALSE(other.is_probe());
    CHECK(other.retry_after() == 4 * kTick);

    probe.record_success();
    CHECK(breaker.state() == BreakerState::closed);
    const CircuitBreaker::Permit after = breaker.try_acquire();
    CHECK(after.allowed());
    CHECK_FALSE(after.is_probe());
  }

  TEST_CASE("a failed probe opens the breaker for a new cooldown from the time it failed") {
    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    for (int i = 0; i < 3; ++i) breaker.try_acquire().record_failure();
    clock.at(5);
    CircuitBreaker::Permit probe = breaker.try_acquire();
    clock.at(6);  // the probe took a tick to fail
    probe.record_failure();
    CHECK(breaker.state() == BreakerState::open);
    clock.at(9);
    CHECK(breaker.try_acquire().retry_after() == 1 * kTick);
    clock.at(10);
    CHECK(breaker.try_acquire().is_probe());
  }

  TEST_CASE("a probe given back without a result lets the next caller probe") {
    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    for (int i = 0; i < 3; ++i) breaker.try_acquire().record_failure();
    clock.at(4);
    {
      const CircuitBreaker::Permit abandoned = breaker.try_acquire();
      REQUIRE(abandoned.is_probe());
    }
    CHECK(breaker.state() == BreakerState::half_open);
    CircuitBreaker::Permit next = breaker.try_acquire();
    CHECK(next.is_probe());
    CHECK_FALSE(breaker.try_acquire().allowed());

    SUBCASE("also when the permit is overwritten by another one") {
      next = CircuitBreaker::Permit{};
      CHECK(breaker.try_acquire().is_probe());
    }
    SUBCASE("and a moved permit answers for the probe once") {
      CircuitBreaker::Permit moved = std::move(next);
      next.record_failure();  // moved from: nothing to answer
      CHECK(breaker.state() == BreakerState::half_open);
      moved.record_success();
      moved.record_failure();  // already answered
      CHECK(breaker.state() == BreakerState::closed);
    }
  }

  TEST_CASE("a late result of a call admitted before the breaker opened changes nothing") {
    TickClock clock;
    CircuitBreaker breaker{kReference, clock.function()};
    CircuitBreaker::Permit slow_success = breaker.try_acquire();
    CircuitBreaker::Permit slow_failure = breaker.try_acquire();
    for (int i = 0; i < 3; ++i) breaker.try_acquire().record_failure();
    REQUIRE(breaker.state() == BreakerState::open);

    slow_success.record_success();
    CHECK(breaker.state() == BreakerState::open);

    clock.at(4);
    CircuitBreaker::Permit probe = breaker.try_acquire();
    REQUIRE(probe.is_probe());
    slow_failure.record_failure();
    CHECK(breaker.state() == BreakerState::half_open);
    probe.record_success();
    CHECK(breaker.state() == BreakerState::closed);
  }

  TEST_CASE("half open admits exactly one probe among concurrent callers" * doctest::timeout(10)) {
    constexpr int kCallers = 8;
    constexpr int kRounds = 20;
    TickClock clock;
    CircuitBreaker breaker{{.failure_threshold = 1, .cooldown = 4 * kTick}, clock.function()};
    breaker.try_acquire().record_failure();

    for (int round = 0; round < kRounds; ++round) {
      CAPTURE(round);
      clock.at(4 * (round + 1));  // only while no caller runs: every round's cooldown is over
      std::latch start{kCallers};
      std::latch all_asked{kCallers};
      std::atomic<int> allowed{0};
      std::atomic<int> probes{0};
      std::atomic<int> rejected{0};
      const bool last_round = round == kRounds - 1;
      {
        std::vector<std::jthread> callers;
        for (int i = 0; i < kCallers; ++i) {
          callers.emplace_back([&] {
            start.arrive_and_wait();
            CircuitBreaker::Permit permit = breaker.try_acquire();
            (permit ? allowed : rejected).fetch_add(1);
            if (permit.is_probe()) probes.fetch_add(1);
            all_asked.arrive_and_wait();  // the probe stays out until every caller has asked
            // The probe fails in every round but the last, which closes the breaker.
            if (last_round) {
              permit.record_success();
            } else {
              permit.record_failure();
            }
          });
        }
      }
      CHECK(allowed.load() == 1);
      CHECK(probes.load() == 1);
      CHECK(rejected.load() == kCallers - 1);
      CHECK(breaker.state() == (last_round ? BreakerState::closed : BreakerState::open));
    }
  }

  TEST_CASE("options name the offending field") {
    CHECK(sandglass::CircuitBreakerOptions{}.validate().empty());
    CHECK(sandglass::CircuitBreakerOptions{.failure_threshold = 0}.validate() ==
          "failure_threshold: must be at least 1");
    CHECK(sandglass::CircuitBreakerOptions{.cooldown = -1ms}.validate() ==
          "cooldown: must not be negative");
  }

  TEST_CASE("states have the names metrics use") {
    CHECK(sandglass::to_string(BreakerState::closed) == "closed");
    CHECK(sandglass::to_string(BreakerState::open) == "open");
    CHECK(sandglass::to_string(BreakerState::half_open) == "half_open");
  }
}

#include "runtime/implausible_message.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace std::chrono_literals;
using sandglass::Deadline;
using sandglass::Duration;
using sandglass::TimePoint;
using sandglass::detail::append_duration;
using sandglass::detail::fits_after;
using sandglass::detail::implausible_message;

namespace {

std::string text_of(Duration d) {
  std::string out;
  append_duration(out, d);
  return out;
}

}  // namespace

TEST_SUITE("implausible_message") {
  TEST_CASE("durations get three significant digits in the largest unit that is at least 1") {
    CHECK(text_of(1170ms) == "1.17s");
    CHECK(text_of(30ms) == "30ms");
    CHECK(text_of(250us) == "250us");
    CHECK(text_of(500ns) == "0.5us");
    CHECK(text_of(7ns) == "0.007us");
    CHECK(text_of(0ns) == "0us");
    CHECK(text_of(-5ms) == "0us");
    CHECK(text_of(1500us) == "1.5ms");
    CHECK(text_of(2s) == "2s");
    CHECK(text_of(12345us) == "12.3ms");
    CHECK(text_of(1200s) == "1200s");
  }

  TEST_CASE("durations are rounded half up, carrying into the next digit") {
    CHECK(text_of(1235us) == "1.24ms");
    CHECK(text_of(1234us) == "1.23ms");
    CHECK(text_of(9999us) == "10ms");
    CHECK(text_of(99950us) == "100ms");
    CHECK(text_of(999500us) == "1000ms");
  }

  TEST_CASE("the message sets the predicted finish against the deadline") {
    const TimePoint now{100s};
    CHECK(implausible_message(now + 900ms, now, 300ms, Deadline::at(now + 200ms), "sleep:slow") ==
          "predicted finish 1.2s after submission (start in 900ms + estimate 300ms for "
          "sleep:slow) > deadline in 200ms");
    CHECK(implausible_message(now + 10ms, now, 5ms, Deadline::at(now + 1s), "q") ==
          "predicted finish 15ms after submission (start in 10ms + estimate 5ms for q) fits the "
          "deadline in 1s, but it would make a queued job of its class miss its own");
  }

  TEST_CASE("an estimate scaled from the job's own expected run time says so") {
    const TimePoint now{100s};
    CHECK(implausible_message(now + 18ms, now, 12ms, Deadline::at(now + 20ms), "sleep", 10ms) ==
          "predicted finish 30ms after submission (start in 18ms + estimate 12ms for sleep, from "
          "its expected 10ms) > deadline in 20ms");
  }

  TEST_CASE("the same job fits once the work ahead of it has drained") {
    const TimePoint now{100s};
    // Finish 1.2 s after now against a deadline 200 ms after it: 1 s later it would fit.
    CHECK(fits_after(now + 900ms, now, 300ms, Deadline::at(now + 200ms)) == 1s);
    // It fits its own deadline (refused for a queued job's promise): once it would start now.
    CHECK(fits_after(now + 10ms, now, 5ms, Deadline::at(now + 1s)) == 10ms);
    CHECK(fits_after(now, now, 5ms, Deadline::at(now + 1s)) == Duration::zero());
  }
}

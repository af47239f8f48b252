// The runtime's measured margin: TailSketch and PredictionError, fed samples directly.
#include "runtime/prediction_error.hpp"

#include <doctest/doctest.h>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::TimePoint;
using sandglass::detail::PredictionError;
using sandglass::detail::TailSketch;

namespace {

const TimePoint kT0{100s};

// 8 ms lies in the bucket [7 × 2^20, 8 × 2^20) ns: the sketch reports its end.
constexpr Duration kEndOf8ms{8 * (1 << 20)};
// 1 ms lies in [7 × 2^17, 8 × 2^17) ns.
constexpr Duration kEndOf1ms{8 * (1 << 17)};

// 208 samples (13 publications' worth) at kT0: `late` starts 8 ms after their prediction, the
// rest on time.
void feed_starts(PredictionError& e, int late) {
  for (int i = 0; i < 208; ++i) e.on_start(kT0, i < late ? kT0 + 8ms : kT0);
}

}  // namespace

TEST_SUITE("TailSketch") {
  TEST_CASE("an empty sketch has a tail of zero") {
    CHECK(TailSketch{}.quantile(0.99) == Duration::zero());
  }

  TEST_CASE("a sample is reported as the end of its bucket, at most a quarter above it") {
    TailSketch s;
    s.add(1000ns, kT0);  // [7 × 128, 8 × 128) ns
    CHECK(s.quantile(0.99) == 1024ns);
    TailSketch exact;
    exact.add(4 * (1 << 20) * 1ns, kT0);  // the start of [4 × 2^20, 5 × 2^20) ns
    CHECK(exact.quantile(0.99) == 5 * (1 << 20) * 1ns);
  }

  TEST_CASE("durations of zero or less count in the tail as zero") {
    TailSketch s;
    for (int i = 0; i < 100; ++i) s.add(-3ms, kT0);
    CHECK(s.quantile(0.99) == Duration::zero());
    CHECK(s.count() == 100);
  }

  TEST_CASE("the tail is the bucket above which at most 1 % of the samples lie") {
    TailSketch s;
    for (int i = 0; i < 99; ++i) s.add(0ns, kT0);
    s.add(8ms, kT0);
    CHECK(s.quantile(0.99) == Duration::zero());  // 1 of 100 above zero: within 1 %
    s.add(8ms, kT0);
    CHECK(s.quantile(0.99) == kEndOf8ms);  // 2 of 101
  }

  TEST_CASE("old samples fade: halved after kMaxAge, forgotten after a long pause") {
    TailSketch s;
    for (int i = 0; i < 3; ++i) s.add(8ms, kT0);
    for (int i = 0; i < 205; ++i) s.add(0ns, kT0);
    CHECK(s.quantile(0.99) == kEndOf8ms);
    s.add(0ns, kT0 + TailSketch::kMaxAge);  // 3 -> 1 late of 102 + 1 + 1
    CHECK(s.count() == 104);
    CHECK(s.quantile(0.99) == Duration::zero());
    s.add(0ns, kT0 + 40 * TailSketch::kMaxAge);
    CHECK(s.count() == 1);
  }

  TEST_CASE("a full window halves the counts") {
    TailSketch s;
    for (std::uint32_t i = 0; i < TailSketch::kWindow; ++i) s.add(1ms, kT0);
    CHECK(s.count() == TailSketch::kWindow);
    s.add(1ms, kT0);
    CHECK(s.count() == TailSketch::kWindow / 2 + 1);
  }
}

TEST_SUITE("PredictionError") {
  TEST_CASE("starts on time and runs within their estimate leave no margin") {
    PredictionError e;
    feed_starts(e, 0);
    for (int i = 0; i < 208; ++i) e.on_finish(kT0, kT0, 10ms, 9ms, kT0);
    CHECK(e.start_tail() == Duration::zero());
    CHECK(e.run_tail() == Duration::zero());
    CHECK(e.margin() == Duration::zero());
  }

  TEST_CASE("late starts beyond 1 % show in the start's tail") {
    SUBCASE("2 of 208 late: within the quantile") {
      PredictionError e;
      feed_starts(e, 2);
      CHECK(e.start_tail() == Duration::zero());
    }
    SUBCASE("3 of 208 late: the late ones' bucket") {
      PredictionError e;
      feed_starts(e, 3);
      CHECK(e.start_tail() == kEndOf8ms);
    }
  }

  TEST_CASE("jobs that finish late beyond 10 % widen the margin by the tail of their lateness") {
    SUBCASE("20 of 208 late: within the margin's quantile") {
      PredictionError e;
      for (int i = 0; i < 208; ++i) e.on_finish(kT0, i < 20 ? kT0 + 8ms : kT0, 10ms, 10ms, kT0);
      CHECK(e.margin() == Duration::zero());
    }
    PredictionError e;
    for (int i = 0; i < 208; ++i) {
      // 21 start 8 ms late and run 1 ms over their 10 ms estimate: 9 ms late in all.
      const bool late = i < 21;
      e.on_finish(kT0, late ? kT0 + 8ms : kT0, 10ms, late ? 11ms : 4ms, kT0);
    }
    CHECK(e.run_tail() == kEndOf1ms);
    CHECK(e.margin() == Duration{5 * (1 << 21)});  // 9 ms lies in [4 × 2^21, 5 × 2^21) ns
  }

  TEST_CASE("the margin is the tail of the finish error, not the sum of the start's and the run's") {
    PredictionError e;
    feed_starts(e, 3);
    for (int i = 0; i < 208; ++i) {
      // 21 start 8 ms late but run 5 ms short of their 10 ms estimate (3 ms late in all); 21
      // others start on time and run 1 ms over (1 ms late); the rest finish early.
      const bool late_start = i < 21;
      const bool long_run = i >= 21 && i < 42;
      e.on_finish(kT0, late_start ? kT0 + 8ms : kT0, 10ms, late_start ? 5ms : (long_run ? 11ms : 4ms), kT0);
    }
    CHECK(e.start_tail() == kEndOf8ms);
    CHECK(e.run_tail() == kEndOf1ms);
    CHECK(e.margin() == Duration{6 * (1 << 19)});  // 3 ms lies in [5 × 2^19, 6 × 2^19) ns
  }

  TEST_CASE("figures are published every kPublishEvery samples") {
    PredictionError e;
    for (std::uint32_t i = 0; i + 1 < PredictionError::kPublishEvery; ++i) e.on_start(kT0, kT0 + 8ms);
    CHECK(e.start_tail() == Duration::zero());
    e.on_start(kT0, kT0 + 8ms);
    CHECK(e.start_tail() == kEndOf8ms);
  }

  TEST_CASE("the margin is not part of what is measured: later errors alone make the next one") {
    PredictionError e;
    for (int i = 0; i < 208; ++i) e.on_finish(kT0, i < 21 ? kT0 + 8ms : kT0, 10ms, 10ms, kT0);
    REQUIRE(e.margin() == kEndOf8ms);
    // Long after (the 8 ms samples forgotten), jobs 1 ms late: the margin becomes their tail,
    // whatever it was.
    const TimePoint t1 = kT0 + 40 * TailSketch::kMaxAge;
    for (int i = 0; i < 208; ++i) e.on_finish(t1, t1 + 1ms, 10ms, 10ms, t1);
    CHECK(e.margin() == kEndOf1ms);
  }

  TEST_CASE("no prediction (the epoch) and no estimate are not samples of what they lack") {
    PredictionError e;
    for (int i = 0; i < 208; ++i) {
      e.on_start(TimePoint{}, kT0 + 8ms);
      e.on_finish(kT0, kT0 + 8ms, Duration::zero(), 5ms, kT0);  // no estimate: nothing
      e.on_finish(TimePoint{}, kT0 + 8ms, 1ms, 5ms, kT0);        // a run only
    }
    CHECK(e.start_tail() == Duration::zero());
    CHECK(e.run_tail() == Duration{8 * (1 << 19)});  // 4 ms lies in [7 × 2^19, 8 × 2^19) ns
    CHECK(e.margin() == Duration::zero());
  }
}

TEST_SUITE("PredictionError drops") {
  TEST_CASE("a job dropped unstarted counts as late as it already was, in the start's and the "
            "finish's tail") {
    PredictionError e;
    for (int i = 0; i < 208; ++i) e.on_finish(kT0, kT0, 10ms, 10ms, kT0);
    REQUIRE(e.margin() == Duration::zero());
    // 24 of 232 (over 10 %) dropped 8 ms after their predicted start, one without a prediction.
    for (int i = 0; i < 24; ++i) e.on_drop(kT0, kT0 + 8ms);
    e.on_drop(TimePoint{}, kT0 + 8ms);
    for (int i = 0; i < 15; ++i) e.on_start(kT0, kT0);  // publishes
    CHECK(e.start_tail() == kEndOf8ms);
    CHECK(e.margin() == kEndOf8ms);
    CHECK(e.run_tail() == Duration::zero());
  }
}

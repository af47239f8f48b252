#include <sandglass/service_time_estimator.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Duration;
using sandglass::ServiceTimeEstimator;
using sandglass::ServiceTimeEstimatorOptions;

namespace {

// Records 1..n milliseconds in a scrambled order (a stride coprime with n), so no test
// depends on samples arriving sorted.
void record_one_to(ServiceTimeEstimator& est, int n) {
  int stride = 7;
  while (n % stride == 0) ++stride;
  for (int i = 0; i < n; ++i) est.record(std::chrono::milliseconds{(i * stride) % n + 1});
}

}  // namespace

TEST_SUITE("ServiceTimeEstimator") {
  TEST_CASE("mostly_short says whether half the kept samples or more took at most short_run") {
    ServiceTimeEstimator est{ServiceTimeEstimatorOptions{.window = 8, .max_age = Duration::max(),
                                                         .short_run = 1ms}};
    CHECK_FALSE(est.mostly_short());
    est.record(1ms);  // exactly short_run counts as short
    CHECK(est.mostly_short());
    est.record(5ms);
    CHECK(est.mostly_short());  // one of two
    est.record(5ms);
    CHECK_FALSE(est.mostly_short());  // one of three
    for (int i = 0; i < 8; ++i) est.record(500us);  // the window of 8 keeps only these
    CHECK(est.mostly_short());
    ServiceTimeEstimator never{ServiceTimeEstimatorOptions{.max_age = Duration::max()}};
    never.record(Duration::zero());
    CHECK_FALSE(never.mostly_short());  // short_run zero: no sample is short
  }

  TEST_CASE("the estimate is zero before the first sample") {
    const ServiceTimeEstimator est;
    CHECK(est.estimate() == Duration::zero());
    CHECK(est.samples() == 0);
  }

  TEST_CASE("the estimate is the nearest-rank p90 of the samples") {
    ServiceTimeEstimator est;
    SUBCASE("one sample") {
      est.record(12ms);
      CHECK(est.estimate() == 12ms);
      CHECK(est.samples() == 1);
    }
    SUBCASE("1 to 10 ms") {
      record_one_to(est, 10);
      CHECK(est.estimate() == 9ms);
      CHECK(est.samples() == 10);
    }
    SUBCASE("1 to 100 ms") {
      record_one_to(est, 100);
      CHECK(est.estimate() == 90ms);
      CHECK(est.samples() == 100);
    }
    SUBCASE("1 to 11 ms rounds the rank up") {
      record_one_to(est, 11);  // 0.9 * 11 = 9.9, so the 10th smallest
      CHECK(est.estimate() == 10ms);
    }
  }

  TEST_CASE("every quantile, high or low, is the nearest-rank sample of a full window with ties") {
    // Shuffled values with repeats: a high quantile is found among the few largest samples, a
    // lower one by a selection; both must give the sorted window's nearest rank.
    std::vector<Duration> values;
    for (int i = 0; i < 128; ++i) values.push_back(Duration{(i * 37) % 101 + (i % 5 == 0 ? 1000 : 0)});
    std::vector<Duration> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    for (const double q : {0.5, 0.9, 0.93, 0.95, 0.97, 0.99, 0.995, 1.0}) {
      CAPTURE(q);
      ServiceTimeEstimator est{{.quantile = q, .window = 128, .refresh_every = 1,
                                .max_age = Duration::max()}};
      sandglass::TimePoint t{};
      for (const Duration v : values) est.record(v, t += 1ms);
      const auto rank = static_cast<std::size_t>(std::ceil(q * 128.0));
      CHECK(est.tail() == sorted[rank - 1]);
      CHECK(est.median() == sorted[63]);
    }
  }

  TEST_CASE("the quantile option picks the nearest-rank sample") {
    double quantile = 0.9;
    Duration expected{};
    SUBCASE("median") {
      quantile = 0.5;
      expected = 5ms;
    }
    SUBCASE("third quartile") {
      quantile = 0.75;
      expected = 8ms;  // 0.75 * 10 = 7.5, so the 8th smallest
    }
    SUBCASE("maximum") {
      quantile = 1.0;
      expected = 10ms;
    }
    CAPTURE(quantile);
    ServiceTimeEstimator est{{.quantile = quantile}};
    record_one_to(est, 10);
    CHECK(est.estimate() == expected);
  }

  TEST_CASE("the estimate covers only the most recent window of samples") {
    ServiceTimeEstimator est{{.quantile = 1.0, .window = 10, .refresh_every = 1}};
    for (int i = 0; i < 10; ++i) est.record(100ms);
    REQUIRE(est.estimate() == 100ms);

    // Nine fast samples leave one slow sample in the window; the tenth pushes it out.
    for (int i = 0; i < 9; ++i) est.record(1ms);
    CHECK(est.estimate() == 100ms);
    est.record(1ms);
    CHECK(est.estimate() == 1ms);
    CHECK(est.samples() == 20);
  }

  TEST_CASE("the sample that fills the window counts at once") {
    SUBCASE("a window of one") {
      ServiceTimeEstimator est{{.quantile = 0.9, .window = 1, .refresh_every = 16}};
      est.record(5ms);
      CHECK(est.estimate() == 5ms);
    }
    SUBCASE("a window of four") {
      ServiceTimeEstimator est{{.quantile = 1.0, .window = 4, .refresh_every = 16}};
      est.record(1ms);
      est.record(2ms);
      est.record(3ms);
      CHECK(est.estimate() == 3ms);
      est.record(4ms);
      CHECK(est.estimate() == 4ms);
    }
  }

  TEST_CASE("once the window is full the estimate changes only every refresh_every records") {
    ServiceTimeEstimator est{{.quantile = 1.0, .window = 4, .refresh_every = 3}};
    // Until the window is full every record refreshes.
    est.record(10ms);
    CHECK(est.estimate() == 10ms);
    est.record(20ms);
    CHECK(est.estimate() == 20ms);
    est.record(30ms);
    CHECK(est.estimate() == 30ms);
    est.record(40ms);
    CHECK(est.estimate() == 40ms);

    // Afterwards only every third record does.
    const std::vector<std::pair<Duration, Duration>> recorded_then_expected{
        {50ms, 40ms}, {60ms, 40ms}, {70ms, 70ms},
        {80ms, 70ms}, {90ms, 70ms}, {100ms, 100ms},
        {1ms, 100ms}, {1ms, 100ms}, {1ms, 100ms},  // window: 100, 1, 1, 1 — 100 still in
        {1ms, 100ms}, {1ms, 100ms}, {1ms, 1ms},
    };
    for (std::size_t i = 0; i < recorded_then_expected.size(); ++i) {
      CAPTURE(i);
      est.record(recorded_then_expected[i].first);
      CHECK(est.estimate() == recorded_then_expected[i].second);
    }
    CHECK(est.samples() == 16);
  }

  TEST_CASE("a negative sample counts as zero") {
    ServiceTimeEstimator est{{.quantile = 0.5}};
    est.record(-5ms);
    CHECK(est.estimate() == Duration::zero());
    CHECK(est.samples() == 1);
    // The median of {0, 3 ms} is 0: the negative sample was kept, as zero.
    est.record(3ms);
    CHECK(est.estimate() == Duration::zero());
    CHECK(est.samples() == 2);
  }

  TEST_CASE("central is the mean, median the median and tail the quantile of the same samples") {
    ServiceTimeEstimator est{{.quantile = 0.9, .window = 10, .max_age = Duration::max()}};
    const sandglass::TimePoint t{1s};
    for (int i = 1; i <= 8; ++i) est.record(1ms, t);
    est.record(50ms, t);
    est.record(60ms, t);
    CHECK(est.central() == 11800us);  // (8 + 50 + 60) ÷ 10 ms
    CHECK(est.median() == 1ms);
    CHECK(est.tail() == 50ms);
    CHECK(est.estimate() == est.tail());
  }

  TEST_CASE("samples older than their lifetime age out, so the estimate heals") {
    using sandglass::TimePoint;
    ServiceTimeEstimator est{{.quantile = 0.99, .window = 128, .refresh_every = 1,
                              .max_age = 20ms, .age_in_runs = 5}};
    const TimePoint t0{1s};
    // A stall: two runs of 50 ms among 2 ms runs; 5 typical runs are less than 20 ms, so
    // samples live 20 ms.
    for (int i = 0; i < 20; ++i) est.record(2ms, t0 + i * 1ms);
    est.record(50ms, t0 + 20ms);
    est.record(50ms, t0 + 20ms);
    est.age(t0 + 20ms);
    CHECK(est.median() == 2ms);
    CHECK(est.central() == Duration{140ms} / 22);
    CHECK(est.tail() == 50ms);
    CHECK(est.sample_lifetime() == 20ms);
    // Nothing is recorded any more (every newcomer rejected); 20 ms on, the slow ones age out
    // with everything else, and the estimate is unknown (zero): admission admits again.
    est.age(t0 + 40ms);
    CHECK(est.kept() == 2);     // the fast ones went; the slow ones are not older than 20 ms
    CHECK(est.tail() == 50ms);
    CHECK(est.sample_lifetime() == 20ms);  // aging alone does not lengthen it
    est.age(t0 + 40ms + 1ns);   // within an eighth of a lifetime of the last recomputation
    CHECK(est.kept() == 2);
    est.age(t0 + 40ms + Duration{20ms} / 8);
    CHECK(est.kept() == 0);
    CHECK(est.tail() == Duration::zero());
    CHECK(est.central() == Duration::zero());
    CHECK(est.samples() == 22);
  }

  TEST_CASE("a window left with only a stall's slow runs does not keep them alive") {
    using sandglass::TimePoint;
    ServiceTimeEstimator est{{.quantile = 0.99, .refresh_every = 1, .max_age = 20ms,
                              .age_in_runs = 10}};
    const TimePoint t0{1s};
    for (int i = 0; i < 100; ++i) est.record(2ms, t0 + i * 100us);
    CHECK(est.sample_lifetime() == 20ms);
    // The process stood still for 50 ms: the fast runs are gone, eight runs of 50 ms arrive.
    const TimePoint after = t0 + 60ms;
    est.age(after);
    CHECK(est.kept() == 0);
    for (int i = 0; i < 8; ++i) est.record(50ms, after);
    CHECK(est.median() == 50ms);
    // Their lifetime follows the kind's typical run (about 3 ms now), not the window's median.
    CHECK(est.sample_lifetime() < 40ms);
    est.age(after + 40ms);
    CHECK(est.kept() == 0);
    CHECK(est.tail() == Duration::zero());
  }

  TEST_CASE("a slow kind keeps its samples for age_in_runs typical runs") {
    using sandglass::TimePoint;
    ServiceTimeEstimator est{{.quantile = 0.9, .max_age = 20ms, .age_in_runs = 10}};
    const TimePoint t0{1s};
    est.record(500ms, t0);
    est.record(500ms, t0 + 1s);
    CHECK(est.sample_lifetime() == 5s);
    est.age(t0 + 5s);
    CHECK(est.kept() == 2);
    est.age(t0 + 5s + 1ms);
    CHECK(est.kept() == 1);
    CHECK(est.tail() == 500ms);
  }

  TEST_CASE("aging drops only the samples past their lifetime, oldest first") {
    using sandglass::TimePoint;
    ServiceTimeEstimator est{{.quantile = 1.0, .refresh_every = 1, .max_age = 100ms,
                              .age_in_runs = 0}};
    const TimePoint t0{1s};
    est.record(9ms, t0);
    est.record(3ms, t0 + 50ms);
    est.record(4ms, t0 + 60ms);
    est.age(t0 + 120ms);
    CHECK(est.kept() == 2);
    CHECK(est.tail() == 4ms);
    CHECK(est.central() == 3500us);
    CHECK(est.median() == 3ms);
  }
}

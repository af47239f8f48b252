#include <sandglass/deadline.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <compare>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Clock;
using sandglass::Deadline;
using sandglass::Duration;
using sandglass::TimePoint;

namespace {

constexpr Duration::rep kMaxRep = Duration::max().count();

}  // namespace

TEST_SUITE("Deadline") {
  TEST_CASE("a deadline after a budget expires exactly when the budget is spent") {
    const TimePoint now{10s};
    const Deadline d = Deadline::after(250ms, now);
    CHECK(d.remaining(now) == 250ms);
    CHECK_FALSE(d.expired(now + 249ms));
    CHECK(d.expired(now + 250ms));
    CHECK(d.remaining(now + 300ms) == Duration::zero());
    CHECK(d.slack(now + 300ms) == -50ms);
  }

  TEST_CASE("a deadline after a budget lies exactly the budget after the given now") {
    const TimePoint now{10s};
    const Deadline d = Deadline::after(250ms, now);
    CHECK(d.time_point() == TimePoint{10250ms});
    CHECK_FALSE(d.is_never());
    CHECK(d == Deadline::at(TimePoint{10250ms}));
  }

  TEST_CASE("a deadline at a time point keeps that time point") {
    const TimePoint t{42s};
    const Deadline d = Deadline::at(t);
    CHECK(d.time_point() == t);
    CHECK_FALSE(d.is_never());
    CHECK(d.remaining(TimePoint{40s}) == 2s);
    CHECK(d.slack(TimePoint{40s}) == 2s);
  }

  TEST_CASE("a deadline after a budget on the steady clock lies between the clock readings "
            "around its creation") {
    const TimePoint before = Clock::now();
    const Deadline d = Deadline::after(1h);
    const TimePoint after = Clock::now();
    CHECK(d.time_point() >= before + 1h);
    CHECK(d.time_point() <= after + 1h);

    const TimePoint t0 = Clock::now();
    const Duration left = d.remaining();
    const TimePoint t1 = Clock::now();
    CHECK(left <= d.time_point() - t0);
    CHECK(left >= d.time_point() - t1);
    CHECK_FALSE(d.expired());
  }

  TEST_CASE("a deadline at or before the steady clock's now is expired") {
    SUBCASE("at now") {
      const Deadline d = Deadline::at(Clock::now());
      CHECK(d.expired());
      CHECK(d.remaining() == Duration::zero());
    }
    SUBCASE("a negative budget") {
      const Deadline d = Deadline::after(-1ms);
      CHECK(d.expired());
      CHECK(d.remaining() == Duration::zero());
    }
  }

  TEST_CASE("a never deadline lies at the end of the clock and never expires") {
    const Deadline d = Deadline::never();
    CHECK(d.is_never());
    CHECK(d.time_point() == TimePoint::max());
    CHECK(d == Deadline{});
    CHECK(Deadline{}.is_never());
    CHECK_FALSE(d.expired(TimePoint{}));
    CHECK_FALSE(d.expired(TimePoint{1000h}));
    CHECK_FALSE(d.expired(TimePoint::max() - 1ns));
    CHECK_FALSE(d.expired());
    CHECK(d.remaining(TimePoint{}) == Duration::max());
    CHECK(d.remaining(TimePoint{1s}) == Duration::max() - 1s);
  }

  TEST_CASE("remaining and slack of a never deadline saturate instead of overflowing") {
    const Deadline d = Deadline::never();
    CHECK(d.remaining(TimePoint{-1ns}) == Duration::max());
    CHECK(d.remaining(TimePoint::min()) == Duration::max());
    CHECK(d.slack(TimePoint{-1ns}) == Duration::max());
    CHECK(d.slack(TimePoint::min()) == Duration::max());
  }

  TEST_CASE("slack is positive before the deadline and zero at it and negative after it") {
    const Deadline d = Deadline::at(TimePoint{5s});
    CHECK(d.slack(TimePoint{4s}) == 1s);
    CHECK(d.slack(TimePoint{5s}) == Duration::zero());
    CHECK(d.slack(TimePoint{5s} + 1ns) == -1ns);
    CHECK(d.slack(TimePoint{7s}) == -2s);
  }

  TEST_CASE("slack saturates at the most negative duration when now is far past the deadline") {
    const Deadline d = Deadline::at(TimePoint::min());
    CHECK(d.slack(TimePoint::max()) == Duration::min());
    CHECK(d.slack(TimePoint{1ns}) == Duration::min());
    CHECK(d.slack(TimePoint{}) == Duration::min());  // exact: min - 0 does not overflow
    CHECK(d.remaining(TimePoint::max()) == Duration::zero());
  }

  TEST_CASE("a deadline expires exactly at its time point and not a nanosecond earlier") {
    const Deadline d = Deadline::at(TimePoint{5s});
    CHECK_FALSE(d.expired(TimePoint{5s} - 1ns));
    CHECK(d.remaining(TimePoint{5s} - 1ns) == 1ns);
    CHECK(d.expired(TimePoint{5s}));
    CHECK(d.remaining(TimePoint{5s}) == Duration::zero());
    CHECK(d.expired(TimePoint{5s} + 1ns));
    CHECK(d.remaining(TimePoint{5s} + 1ns) == Duration::zero());
  }

  TEST_CASE("a negative budget gives a deadline that is already expired") {
    const TimePoint now{10s};
    SUBCASE("minus one nanosecond") {
      const Deadline d = Deadline::after(-1ns, now);
      CHECK(d.time_point() == now - 1ns);
      CHECK(d.expired(now));
      CHECK(d.remaining(now) == Duration::zero());
      CHECK(d.slack(now) == -1ns);
    }
    SUBCASE("minus one hour") {
      const Deadline d = Deadline::after(-1h, now);
      CHECK(d.time_point() == now - 1h);
      CHECK(d.expired(now));
      CHECK(d.remaining(now) == Duration::zero());
      CHECK(d.slack(now) == -1h);
    }
    SUBCASE("the most negative duration, without overflow") {
      const Deadline d = Deadline::after(Duration::min(), now);
      CHECK(d.time_point() == TimePoint{Duration::min() + 10s});
      CHECK(d.expired(now));
      CHECK(d.remaining(now) == Duration::zero());
    }
    SUBCASE("the most negative duration before the epoch saturates at the clock's start") {
      const Deadline d = Deadline::after(Duration::min(), TimePoint{-1s});
      CHECK(d.time_point() == TimePoint::min());
      CHECK(d.expired(TimePoint{-1s}));
    }
  }

  TEST_CASE("a zero budget gives a deadline that is expired at once") {
    const TimePoint now{10s};
    const Deadline d = Deadline::after(Duration::zero(), now);
    CHECK(d.time_point() == now);
    CHECK(d.expired(now));
    CHECK(d.remaining(now) == Duration::zero());
  }

  TEST_CASE("the largest budget gives a never deadline") {
    SUBCASE("after a positive now") {
      const Deadline d = Deadline::after(Duration::max(), TimePoint{10s});
      CHECK(d == Deadline::never());
      CHECK(d.is_never());
    }
    SUBCASE("after the clock's epoch") {
      CHECK(Deadline::after(Duration::max(), TimePoint{}) == Deadline::never());
    }
    SUBCASE("after now on the steady clock") {
      CHECK(Deadline::after(Duration::max()).is_never());
    }
    SUBCASE("a large budget that still fits is not never") {
      const Deadline d = Deadline::after(Duration::max() - 1s, TimePoint{});
      CHECK_FALSE(d.is_never());
      CHECK(d.time_point() == TimePoint::max() - 1s);
    }
  }

  TEST_CASE("saturating_add adds exactly when the sum fits") {
    CHECK(sandglass::saturating_add(TimePoint{5s}, 2s) == TimePoint{7s});
    CHECK(sandglass::saturating_add(TimePoint{5s}, -7s) == TimePoint{-2s});
    CHECK(sandglass::saturating_add(TimePoint{5s}, Duration::zero()) == TimePoint{5s});
    CHECK(sandglass::saturating_add(TimePoint{}, Duration::max()) == TimePoint::max());
    CHECK(sandglass::saturating_add(TimePoint{}, Duration::min()) == TimePoint::min());
    CHECK(sandglass::saturating_add(TimePoint::max(), Duration::min()) == TimePoint{-1ns});
    CHECK(sandglass::saturating_add(TimePoint::min(), Duration::max()) == TimePoint{-1ns});
    CHECK(sandglass::saturating_add(TimePoint::max() - 1ns, 1ns) == TimePoint::max());
  }

  TEST_CASE("saturating_add clamps at the clock's range instead of overflowing") {
    SUBCASE("past the end") {
      CHECK(sandglass::saturating_add(TimePoint::max(), 1ns) == TimePoint::max());
      CHECK(sandglass::saturating_add(TimePoint::max(), Duration::max()) == TimePoint::max());
      CHECK(sandglass::saturating_add(TimePoint{1ns}, Duration::max()) == TimePoint::max());
      CHECK(sandglass::saturating_add(TimePoint::max() - 1ns, 2ns) == TimePoint::max());
    }
    SUBCASE("before the start") {
      CHECK(sandglass::saturating_add(TimePoint::min(), -1ns) == TimePoint::min());
      CHECK(sandglass::saturating_add(TimePoint::min(), Duration::min()) == TimePoint::min());
      CHECK(sandglass::saturating_add(TimePoint{-1ns}, Duration::min()) == TimePoint::min());
    }
  }

  TEST_CASE("saturating_sub subtracts exactly when the difference fits") {
    CHECK(sandglass::saturating_sub(TimePoint{5s}, TimePoint{2s}) == 3s);
    CHECK(sandglass::saturating_sub(TimePoint{2s}, TimePoint{5s}) == -3s);
    CHECK(sandglass::saturating_sub(TimePoint{5s}, TimePoint{5s}) == Duration::zero());
    CHECK(sandglass::saturating_sub(TimePoint::max(), TimePoint{}) == Duration::max());
    CHECK(sandglass::saturating_sub(TimePoint{}, TimePoint::max()) == Duration{-kMaxRep});
    CHECK(sandglass::saturating_sub(TimePoint{-1ns}, TimePoint::min()) == Duration::max());
    CHECK(sandglass::saturating_sub(TimePoint::max(), TimePoint::max()) == Duration::zero());
    CHECK(sandglass::saturating_sub(TimePoint::min(), TimePoint::min()) == Duration::zero());
  }

  TEST_CASE("saturating_sub clamps at the duration's range instead of overflowing") {
    CHECK(sandglass::saturating_sub(TimePoint::max(), TimePoint::min()) == Duration::max());
    CHECK(sandglass::saturating_sub(TimePoint::max(), TimePoint{-1ns}) == Duration::max());
    CHECK(sandglass::saturating_sub(TimePoint::min(), TimePoint::max()) == Duration::min());
    CHECK(sandglass::saturating_sub(TimePoint::min(), TimePoint{1ns}) == Duration::min());
    CHECK(sandglass::saturating_sub(TimePoint{}, TimePoint::min()) == Duration::max());
  }

  TEST_CASE("saturating arithmetic and deadlines are usable in constant expressions") {
    static_assert(sandglass::saturating_add(TimePoint::max(), 1ns) == TimePoint::max());
    static_assert(sandglass::saturating_sub(TimePoint::min(), TimePoint::max()) ==
                  Duration::min());
    static_assert(Deadline::after(Duration::max(), TimePoint{1s}).is_never());
    static_assert(Deadline::at(TimePoint{5s}).remaining(TimePoint{3s}) == 2s);
    constexpr Deadline d = sandglass::earlier(Deadline::at(TimePoint{1s}), Deadline::never());
    CHECK(d.time_point() == TimePoint{1s});
  }

  TEST_CASE("earlier returns the deadline that comes first whichever argument it is") {
    const Deadline a = Deadline::at(TimePoint{1s});
    const Deadline b = Deadline::at(TimePoint{2s});
    CHECK(sandglass::earlier(a, b) == a);
    CHECK(sandglass::earlier(b, a) == a);
    CHECK(sandglass::earlier(a, a) == a);
    CHECK(sandglass::earlier(Deadline::never(), b) == b);
    CHECK(sandglass::earlier(b, Deadline::never()) == b);
    CHECK(sandglass::earlier(Deadline::never(), Deadline::never()).is_never());
    CHECK(sandglass::earlier(Deadline::at(TimePoint::min()), a).time_point() ==
          TimePoint::min());
  }

  TEST_CASE("deadlines are ordered by their time points with never last") {
    const Deadline a = Deadline::at(TimePoint{1s});
    const Deadline b = Deadline::at(TimePoint{2s});
    const Deadline expired = Deadline::after(-1s, TimePoint{1s});

    CHECK(a < b);
    CHECK(b > a);
    CHECK(a <= a);
    CHECK(a >= a);
    CHECK(a != b);
    CHECK(a == Deadline::at(TimePoint{1s}));
    CHECK((a <=> b) == std::strong_ordering::less);
    CHECK((b <=> a) == std::strong_ordering::greater);
    CHECK((a <=> Deadline::at(TimePoint{1s})) == std::strong_ordering::equal);
    CHECK(expired < a);
    CHECK(b < Deadline::never());
    CHECK(Deadline::at(TimePoint::max() - 1ns) < Deadline::never());

    std::vector<Deadline> ds{Deadline::never(), b, expired, a};
    std::ranges::sort(ds);
    CHECK(ds == std::vector<Deadline>{expired, a, b, Deadline::never()});
  }
}

#include <sandglass/deadline_queue.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <deque>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Admission;
using sandglass::Deadline;
using sandglass::DeadlineQueue;
using sandglass::DroppedItem;
using sandglass::Duration;
using sandglass::Priority;
using sandglass::QueueItem;
using sandglass::Reason;
using sandglass::TimePoint;

namespace {

const TimePoint kNow{10s};

struct Job : QueueItem {
  int id = 0;
};

// Owns the test's items. A deque never moves its elements, so items stay where the queue links
// them. Declare it before the queue: the queue's destructor still touches linked items.
class Jobs {
 public:
  Job& add(int id, Priority priority, TimePoint deadline, Duration estimate = Duration::zero(),
           std::uint32_t group = 0) {
    Job& job = jobs_.emplace_back();
    job.id = id;
    job.priority = priority;
    job.deadline = Deadline::at(deadline);
    job.estimate = estimate;
    job.group = group;
    return job;
  }

 private:
  std::deque<Job> jobs_;
};

int id_of(const QueueItem* item) {
  return item == nullptr ? -1 : static_cast<const Job*>(item)->id;
}

std::vector<int> ids_of(const std::vector<QueueItem*>& items) {
  std::vector<int> ids;
  for (const QueueItem* item : items) ids.push_back(id_of(item));
  return ids;
}

std::vector<int> ids_of(const std::vector<DroppedItem>& dropped) {
  std::vector<int> ids;
  for (const DroppedItem& d : dropped) ids.push_back(id_of(d.item));
  return ids;
}

// Pops until nothing can start; the ids in the order handed out.
std::vector<int> pop_all(DeadlineQueue& queue, TimePoint now, std::vector<DroppedItem>& dropped) {
  std::vector<int> ids;
  while (QueueItem* item = queue.pop(now, dropped)) ids.push_back(id_of(item));
  return ids;
}

bool refuse_group_1(std::uint32_t group) { return group != 1; }

}  // namespace

TEST_SUITE("DeadlineQueue") {
  TEST_CASE("pop serves critical then high then normal then sheddable regardless of deadlines") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8}};
    REQUIRE(q.admit(jobs.add(4, Priority::sheddable, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{12s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint{13s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{14s}), kNow).admitted());
    CHECK(q.size() == 4);

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{1, 2, 3, 4});
    CHECK(dropped.empty());
    CHECK(q.empty());
  }

  TEST_CASE("pop serves the earliest deadline first within a class") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8}};
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{30s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{20s}), kNow).admitted());

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{1, 2, 3});
  }

  TEST_CASE("pop serves items with equal deadlines in the order they were admitted") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8}};
    for (int id = 1; id <= 4; ++id) {
      REQUIRE(q.admit(jobs.add(id, Priority::high, TimePoint{20s}), kNow).admitted());
    }

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{1, 2, 3, 4});
  }

  TEST_CASE("pop on an empty queue returns nullptr") {
    DeadlineQueue q{{}};
    std::vector<DroppedItem> dropped;
    CHECK(q.pop(kNow, dropped) == nullptr);
    CHECK(dropped.empty());
  }

  TEST_CASE("a closed queue answers shutting_down before any other reason") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 1, .workers = 1, .min_useful = 5ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{20s}), kNow).admitted());
    q.close();
    CHECK(q.closed());

    Job* newcomer = nullptr;
    SUBCASE("a plausible item") { newcomer = &jobs.add(2, Priority::critical, TimePoint{20s}); }
    SUBCASE("an item with too small a budget") {
      newcomer = &jobs.add(2, Priority::critical, kNow + 1ms);
    }
    SUBCASE("an item whose deadline already passed") {
      newcomer = &jobs.add(2, Priority::critical, kNow - 1s);
    }
    SUBCASE("an implausible item") {
      newcomer = &jobs.add(2, Priority::critical, TimePoint{11s}, 5s);
    }
    SUBCASE("an item of the same class as a full queue") {
      newcomer = &jobs.add(2, Priority::sheddable, TimePoint{20s});
    }

    const Admission a = q.admit(*newcomer, kNow);
    CHECK(a.reason == Reason::shutting_down);
    CHECK_FALSE(a.admitted());
    CHECK(a.shed == nullptr);
    CHECK(q.size() == 1);
    CHECK(q.size(Priority::sheddable) == 1);
    CHECK_FALSE(q.remove(*newcomer));
  }

  TEST_CASE("an item with less than min_useful left is rejected as budget_too_small") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 5ms}};

    SUBCASE("exactly min_useful left is enough") {
      Job& job = jobs.add(1, Priority::normal, kNow + 5ms);
      CHECK(q.admit(job, kNow).reason == Reason::ok);
      CHECK(q.size() == 1);
    }
    SUBCASE("one nanosecond less is not") {
      Job& job = jobs.add(1, Priority::normal, kNow + 5ms - 1ns);
      CHECK(q.admit(job, kNow).reason == Reason::budget_too_small);
      CHECK(q.empty());
      CHECK_FALSE(q.remove(job));
    }
    SUBCASE("a deadline in the past") {
      CHECK(q.admit(jobs.add(1, Priority::normal, kNow - 1s), kNow).reason ==
            Reason::budget_too_small);
      CHECK(q.empty());
    }
  }

  TEST_CASE("budget_too_small is checked before implausibility and fullness") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 1, .workers = 1, .min_useful = 5ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{20s}, 1s), kNow).admitted());

    // Too small, implausible (1 s ahead plus a 1 s estimate) and the queue is full.
    const Admission a = q.admit(jobs.add(2, Priority::critical, kNow + 4ms, 1s), kNow);
    CHECK(a.reason == Reason::budget_too_small);
    CHECK(a.shed == nullptr);
    CHECK(q.size() == 1);
  }

  TEST_CASE("with min_useful zero an item with no time left is still budget_too_small") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = Duration::zero()}};
    CHECK(q.admit(jobs.add(1, Priority::normal, kNow), kNow).reason == Reason::budget_too_small);
    CHECK(q.admit(jobs.add(2, Priority::normal, kNow + 1ns), kNow).reason == Reason::ok);
    CHECK(q.size() == 1);
  }

  TEST_CASE("an item is implausible exactly when now + work ahead / workers + estimate passes "
            "its deadline") {
    std::size_t workers = 1;
    SUBCASE("one worker") { workers = 1; }
    SUBCASE("two workers") { workers = 2; }
    SUBCASE("three workers") { workers = 3; }
    CAPTURE(workers);

    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = workers, .min_useful = 1ms}};
    // 60 ms of normal work ahead: equal deadlines run in arrival order.
    const TimePoint deadline = kNow + 100ms;
    REQUIRE(q.admit(jobs.add(1, Priority::normal, deadline, 40ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, deadline, 20ms), kNow).admitted());
    REQUIRE(q.work_ahead(Priority::normal) == 60ms);

    const Duration wait = 60ms / static_cast<Duration::rep>(workers);  // 60, 30 or 20 ms
    const Duration fits = deadline - kNow - wait;  // the largest estimate that finishes in time

    // Completion one nanosecond after the deadline is implausible ...
    Job& late = jobs.add(3, Priority::normal, deadline, fits + 1ns);
    const Admission rejected = q.admit(late, kNow);
    CHECK(rejected.reason == Reason::deadline_implausible);
    CHECK(rejected.shed == nullptr);
    CHECK(q.size() == 2);
    CHECK_FALSE(q.remove(late));

    // ... completion exactly at the deadline is admitted.
    Job& exact = jobs.add(4, Priority::normal, deadline, fits);
    CHECK(q.admit(exact, kNow).reason == Reason::ok);
    CHECK(q.size() == 3);
  }

  TEST_CASE("the work ahead is divided by the number of workers") {
    // 80 ms ahead + 50 ms estimate misses a 100 ms deadline with one worker; 40 ms + 50 ms
    // meets it with two.
    std::size_t workers = 1;
    Reason expected = Reason::ok;
    SUBCASE("one worker") {
      workers = 1;
      expected = Reason::deadline_implausible;
    }
    SUBCASE("two workers") {
      workers = 2;
      expected = Reason::ok;
    }
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = workers, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, kNow + 100ms, 80ms), kNow).admitted());
    CHECK(q.admit(jobs.add(2, Priority::normal, kNow + 100ms, 50ms), kNow).reason == expected);
  }

  TEST_CASE("zero workers in the options count as one") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 0, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, kNow + 100ms, 80ms), kNow).admitted());
    CHECK(q.admit(jobs.add(2, Priority::normal, kNow + 100ms, 20ms), kNow).reason == Reason::ok);
    CHECK(q.admit(jobs.add(3, Priority::normal, kNow + 100ms, 1ms), kNow).reason ==
          Reason::deadline_implausible);
  }

  TEST_CASE("only work of the newcomer's class and higher classes counts as ahead of it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    // Lower classes hold far more work than any deadline below allows.
    REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{100s}, 50s), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{100s}, 40s), kNow).admitted());

    SUBCASE("a high item ignores normal and sheddable work") {
      CHECK(q.admit(jobs.add(3, Priority::high, kNow + 100ms, 100ms), kNow).reason == Reason::ok);
    }
    SUBCASE("a normal item counts its own class up to its deadline but not sheddable work") {
      // 40 s ahead (item 2, an equal deadline) + 50 s: exactly at the deadline, 90 s away.
      CHECK(q.admit(jobs.add(3, Priority::normal, TimePoint{100s}, 50s), kNow).reason ==
            Reason::ok);
      CHECK(q.admit(jobs.add(4, Priority::normal, TimePoint{100s}, 1ms), kNow).reason ==
            Reason::deadline_implausible);
    }
    SUBCASE("higher class work counts") {
      REQUIRE(q.admit(jobs.add(3, Priority::critical, TimePoint{100s}, 30ms), kNow).admitted());
      CHECK(q.admit(jobs.add(4, Priority::high, kNow + 100ms, 71ms), kNow).reason ==
            Reason::deadline_implausible);
      CHECK(q.admit(jobs.add(5, Priority::high, kNow + 100ms, 70ms), kNow).reason == Reason::ok);
    }
    SUBCASE("work of the newcomer's class with later deadlines does not count") {
      REQUIRE(q.admit(jobs.add(3, Priority::high, TimePoint{100s}, 30ms), kNow).admitted());
      CHECK(q.admit(jobs.add(4, Priority::high, kNow + 100ms, 100ms), kNow).reason == Reason::ok);
    }
    SUBCASE("work of the newcomer's class with an equal deadline counts") {
      REQUIRE(q.admit(jobs.add(3, Priority::high, kNow + 100ms, 30ms), kNow).admitted());
      CHECK(q.admit(jobs.add(4, Priority::high, kNow + 100ms, 71ms), kNow).reason ==
            Reason::deadline_implausible);
    }
  }

  TEST_CASE("an item with a zero estimate is never rejected as implausible") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{1000s}, 500s), kNow).admitted());
    REQUIRE(q.work_ahead(Priority::normal) == 500s);

    const Admission a = q.admit(jobs.add(2, Priority::normal, kNow + 1ms), kNow);
    CHECK(a.reason == Reason::ok);
    CHECK(q.size() == 2);
  }

  TEST_CASE("a full queue sheds the latest item of the lowest non-empty class below the "
            "newcomer's") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 4, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{30s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{40s}), kNow).admitted());
    Job& early = jobs.add(3, Priority::sheddable, TimePoint{11s});
    Job& late = jobs.add(4, Priority::sheddable, TimePoint{12s});
    REQUIRE(q.admit(late, kNow).admitted());
    REQUIRE(q.admit(early, kNow).admitted());
    REQUIRE(q.size() == 4);

    // The sheddable item goes even though the normal one has a later deadline.
    Job& newcomer = jobs.add(5, Priority::high, TimePoint{20s});
    const Admission a = q.admit(newcomer, kNow);
    CHECK(a.reason == Reason::ok);
    CHECK(a.admitted());
    CHECK(a.shed == &late);
    CHECK(q.size() == 4);
    CHECK(q.size(Priority::sheddable) == 1);
    CHECK(q.size(Priority::high) == 2);
    CHECK_FALSE(q.remove(late));  // no longer queued

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{5, 1, 2, 3});
  }

  TEST_CASE("a full queue sheds from the next class up when the lowest classes are empty") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 3, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{30s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{11s}), kNow).admitted());
    Job& latest_normal = jobs.add(3, Priority::normal, TimePoint{15s});
    REQUIRE(q.admit(latest_normal, kNow).admitted());

    const Admission a = q.admit(jobs.add(4, Priority::critical, TimePoint{20s}), kNow);
    CHECK(a.reason == Reason::ok);
    CHECK(a.shed == &latest_normal);
    CHECK(q.size() == 3);

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{4, 1, 2});
  }

  TEST_CASE("a full queue never sheds an item of the newcomer's class or a higher one") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 2, .workers = 1, .min_useful = 1ms}};
    Priority newcomer_class = Priority::normal;
    SUBCASE("the same class") {
      REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{30s}), kNow).admitted());
      REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{40s}), kNow).admitted());
      newcomer_class = Priority::normal;
    }
    SUBCASE("higher classes") {
      REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{30s}), kNow).admitted());
      REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint{40s}), kNow).admitted());
      newcomer_class = Priority::normal;
    }
    SUBCASE("a sheddable newcomer in a queue of sheddable items") {
      REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{30s}), kNow).admitted());
      REQUIRE(q.admit(jobs.add(2, Priority::sheddable, TimePoint{40s}), kNow).admitted());
      newcomer_class = Priority::sheddable;
    }

    // An earlier deadline than everything queued does not help.
    Job& newcomer = jobs.add(3, newcomer_class, TimePoint{11s});
    const Admission a = q.admit(newcomer, kNow);
    CHECK(a.reason == Reason::queue_full);
    CHECK(a.shed == nullptr);
    CHECK(q.size() == 2);
    CHECK_FALSE(q.remove(newcomer));

    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{1, 2});
  }

  TEST_CASE("an implausible newcomer is rejected before a full queue sheds for it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 1, .workers = 1, .min_useful = 1ms}};
    Job& victim = jobs.add(1, Priority::sheddable, TimePoint{30s});
    REQUIRE(q.admit(victim, kNow).admitted());

    const Admission a = q.admit(jobs.add(2, Priority::critical, kNow + 10ms, 11ms), kNow);
    CHECK(a.reason == Reason::deadline_implausible);
    CHECK(a.shed == nullptr);
    CHECK(q.size() == 1);
    CHECK(q.remove(victim));
  }

  TEST_CASE("pop drops an item whose deadline passed while queued and never returns it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::critical, TimePoint{12s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(4, Priority::normal, TimePoint{30s}), kNow).admitted());

    // At 12 s: 1 and 3 expired, 2 expires exactly now (a deadline is expired at its instant).
    std::vector<DroppedItem> dropped;
    QueueItem* next = q.pop(TimePoint{12s}, dropped);
    CHECK(id_of(next) == 4);
    REQUIRE(dropped.size() == 3);
    CHECK(ids_of(dropped) == std::vector<int>{1, 2, 3});
    for (const DroppedItem& d : dropped) CHECK(d.reason == Reason::expired_in_queue);
    CHECK(q.empty());
    CHECK(q.pop(TimePoint{12s}, dropped) == nullptr);
    CHECK(dropped.size() == 3);
  }

  TEST_CASE("pop appends to dropped without clearing it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{11s}), kNow).admitted());
    Job& earlier = jobs.add(7, Priority::normal, TimePoint{1s});
    std::vector<DroppedItem> dropped{{&earlier, Reason::too_late_to_start}};
    CHECK(q.pop(TimePoint{11s}, dropped) == nullptr);
    CHECK(ids_of(dropped) == std::vector<int>{7, 1});
  }

  TEST_CASE("pop drops an item with less time left than its estimate as too_late_to_start") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{11s}, 300ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint{11s}, 200ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::high, TimePoint{13s}), kNow).admitted());

    // At 10.8 s both have 200 ms left: item 1 needs 300 ms, item 2 exactly its 200 ms.
    const TimePoint later = TimePoint{11s} - 200ms;
    std::vector<DroppedItem> dropped;
    QueueItem* next = q.pop(later, dropped);
    CHECK(id_of(next) == 2);
    REQUIRE(dropped.size() == 1);
    CHECK(id_of(dropped[0].item) == 1);
    CHECK(dropped[0].reason == Reason::too_late_to_start);
    CHECK(q.size() == 1);
  }

  TEST_CASE("without drop_if_cannot_finish pop returns items that cannot finish") {
    Jobs jobs;
    DeadlineQueue q{
        {.capacity = 8, .workers = 1, .min_useful = 1ms, .drop_if_cannot_finish = false}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{11s}, 300ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint{11s}, 200ms), kNow).admitted());

    // At 10.9 s both have 100 ms left, less than either estimate.
    std::vector<DroppedItem> dropped;
    CHECK(pop_all(q, TimePoint{11s} - 100ms, dropped) == std::vector<int>{1, 2});
    CHECK(dropped.empty());
  }

  TEST_CASE("without drop_if_cannot_finish pop still drops expired items") {
    Jobs jobs;
    DeadlineQueue q{
        {.capacity = 8, .workers = 1, .min_useful = 1ms, .drop_if_cannot_finish = false}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{11s}, 300ms), kNow).admitted());

    std::vector<DroppedItem> dropped;
    CHECK(q.pop(TimePoint{11s}, dropped) == nullptr);
    REQUIRE(dropped.size() == 1);
    CHECK(dropped[0].reason == Reason::expired_in_queue);
  }

  TEST_CASE("expire removes exactly the expired items of every class and parked group") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    // Group 1 items, parked by a pop that refuses group 1 and hands out the sheddable one.
    REQUIRE(q.admit(jobs.add(5, Priority::high, TimePoint{11s} + 500ms, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(6, Priority::high, TimePoint{14s}, 0ms, 1), kNow).admitted());
    Job& four = jobs.add(4, Priority::sheddable, TimePoint{20s});
    REQUIRE(q.admit(four, kNow).admitted());
    {
      std::vector<DroppedItem> none;
      REQUIRE(q.pop(kNow, none, refuse_group_1) == &four);
      REQUIRE(none.empty());
    }
    REQUIRE(q.admit(four, kNow).admitted());
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::critical, TimePoint{13s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{12s}), kNow).admitted());
    REQUIRE(q.size() == 6);

    std::vector<DroppedItem> dropped;
    q.expire(TimePoint{12s}, dropped);
    CHECK(ids_of(dropped) == std::vector<int>{1, 5, 3});  // class by class, parked ones with their class
    for (const DroppedItem& d : dropped) CHECK(d.reason == Reason::expired_in_queue);
    CHECK(q.size() == 3);
    CHECK(q.size(Priority::critical) == 1);
    CHECK(q.size(Priority::high) == 1);
    CHECK(q.size(Priority::normal) == 0);
    CHECK(q.size(Priority::sheddable) == 1);

    SUBCASE("nothing more expires at the same instant") {
      q.expire(TimePoint{12s}, dropped);
      CHECK(dropped.size() == 3);
    }
    SUBCASE("the parked survivor is still parked") {
      std::vector<DroppedItem> more;
      CHECK(pop_all(q, TimePoint{12s}, more) == std::vector<int>{2, 4});
      CHECK(q.size() == 1);
      CHECK(q.unpark(1));
      CHECK(id_of(q.pop(TimePoint{12s}, more)) == 6);
      CHECK(more.empty());
    }
  }

  TEST_CASE("earliest_deadline is the earliest of queued and parked items") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    CHECK(q.earliest_deadline() == Deadline::never());

    Job& normal = jobs.add(1, Priority::normal, TimePoint{15s});
    Job& sheddable = jobs.add(2, Priority::sheddable, TimePoint{13s});
    Job& parked = jobs.add(3, Priority::critical, TimePoint{12s}, 0ms, 1);
    REQUIRE(q.admit(normal, kNow).admitted());
    CHECK(q.earliest_deadline() == Deadline::at(TimePoint{15s}));
    REQUIRE(q.admit(sheddable, kNow).admitted());
    CHECK(q.earliest_deadline() == Deadline::at(TimePoint{13s}));
    REQUIRE(q.admit(parked, kNow).admitted());

    std::vector<DroppedItem> dropped;
    REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 1);  // parks 3, hands out 1
    CHECK(q.earliest_deadline() == Deadline::at(TimePoint{12s}));
    REQUIRE(q.remove(parked));
    CHECK(q.earliest_deadline() == Deadline::at(TimePoint{13s}));
    REQUIRE(q.remove(sheddable));
    CHECK(q.earliest_deadline() == Deadline::never());
  }

  TEST_CASE("remove unlinks a queued or parked item and refuses an unqueued one") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    Job& a = jobs.add(1, Priority::normal, TimePoint{20s}, 10ms);
    Job& b = jobs.add(2, Priority::normal, TimePoint{21s}, 20ms);
    Job& grouped = jobs.add(3, Priority::normal, TimePoint{19s}, 40ms, 1);
    Job& never_admitted = jobs.add(4, Priority::normal, TimePoint{22s});
    REQUIRE(q.admit(a, kNow).admitted());
    REQUIRE(q.admit(b, kNow).admitted());
    REQUIRE(q.admit(grouped, kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 1);  // parks 3, hands out 1
    REQUIRE(q.size() == 2);
    REQUIRE(q.work_ahead(Priority::normal) == 60ms);

    SUBCASE("a queued item") {
      CHECK(q.remove(b));
      CHECK(q.size() == 1);
      CHECK(q.work_ahead(Priority::normal) == 40ms);
      CHECK_FALSE(q.remove(b));
      CHECK(q.pop(kNow, dropped, refuse_group_1) == nullptr);
    }
    SUBCASE("a parked item") {
      CHECK(q.remove(grouped));
      CHECK(q.size() == 1);
      CHECK(q.size(Priority::normal) == 1);
      CHECK(q.work_ahead(Priority::normal) == 20ms);
      CHECK_FALSE(q.unpark(1));
      CHECK_FALSE(q.remove(grouped));
    }
    SUBCASE("a popped item") {
      CHECK_FALSE(q.remove(a));
      CHECK(q.size() == 2);
    }
    SUBCASE("an item never admitted") {
      CHECK_FALSE(q.remove(never_admitted));
      CHECK(q.size() == 2);
    }
    CHECK(dropped.empty());
  }

  TEST_CASE("a removed item can be admitted again") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    Job& job = jobs.add(1, Priority::high, TimePoint{20s}, 5ms);
    REQUIRE(q.admit(job, kNow).admitted());
    REQUIRE(q.remove(job));
    CHECK(q.admit(job, kNow).admitted());
    CHECK(q.size() == 1);
    CHECK(q.work_ahead(Priority::high) == 5ms);
  }

  TEST_CASE("take_all unlinks every item with the highest class first and parked ones last") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(5, Priority::high, TimePoint{40s}, 7ms, 1), kNow).admitted());
    Job& six = jobs.add(6, Priority::high, TimePoint{50s});
    REQUIRE(q.admit(six, kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(q.pop(kNow, dropped, refuse_group_1) == &six);  // parks 5 on the way
    REQUIRE(q.admit(six, kNow).admitted());
    REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::critical, TimePoint{30s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{12s}, 5ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(4, Priority::critical, TimePoint{20s}), kNow).admitted());
    REQUIRE(q.size() == 6);

    const std::vector<QueueItem*> all = q.take_all();
    CHECK(ids_of(all) == std::vector<int>{4, 2, 6, 3, 1, 5});
    CHECK(q.empty());
    CHECK(q.size(Priority::high) == 0);
    CHECK(q.work_ahead(Priority::sheddable) == Duration::zero());
    CHECK(q.earliest_deadline() == Deadline::never());
    CHECK_FALSE(q.unpark(1));
    CHECK(q.pop(kNow, dropped) == nullptr);
    for (QueueItem* item : all) CHECK_FALSE(q.remove(*item));
    CHECK(dropped.empty());
  }

  TEST_CASE("take_all on an empty queue returns nothing") {
    DeadlineQueue q{{}};
    CHECK(q.take_all().empty());
  }

  TEST_CASE("pop parks items whose group may not start and returns the next runnable one") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{11s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint{12s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::high, TimePoint{13s}, 0ms, 2), kNow).admitted());
    REQUIRE(q.admit(jobs.add(4, Priority::normal, TimePoint{10s} + 1ms), kNow).admitted());

    std::vector<std::uint32_t> asked;
    auto can_start = [&](std::uint32_t group) {
      asked.push_back(group);
      return group != 1;
    };
    std::vector<DroppedItem> dropped;
    CHECK(id_of(q.pop(kNow, dropped, can_start)) == 3);
    CHECK(asked == std::vector<std::uint32_t>{1, 1, 2});
    CHECK(q.size() == 3);               // parked items still count
    CHECK(q.size(Priority::high) == 2);

    // The parked items are not offered again, even when their group could start now.
    CHECK(id_of(q.pop(kNow, dropped)) == 4);
    CHECK(q.pop(kNow, dropped) == nullptr);
    CHECK(q.size() == 2);
    CHECK(dropped.empty());
  }

  TEST_CASE("pop asks can_start only about items that have a group") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{11s}), kNow).admitted());
    int calls = 0;
    std::vector<DroppedItem> dropped;
    CHECK(id_of(q.pop(kNow, dropped, [&](std::uint32_t) {
      ++calls;
      return false;
    })) == 1);
    CHECK(calls == 0);
  }

  TEST_CASE("pop drops an expired grouped item instead of parking it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::high, TimePoint{11s}, 0ms, 1), kNow).admitted());
    std::vector<DroppedItem> dropped;
    CHECK(q.pop(TimePoint{11s}, dropped, refuse_group_1) == nullptr);
    CHECK(ids_of(dropped) == std::vector<int>{1});
    CHECK(q.empty());
    CHECK_FALSE(q.unpark(1));
  }

  TEST_CASE("unpark returns the earliest parked item of the group so the next pop yields it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{13s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{12s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{14s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(4, Priority::normal, TimePoint{11s}, 0ms, 2), kNow).admitted());
    std::vector<DroppedItem> dropped;
    auto refuse_all_groups = [](std::uint32_t) { return false; };
    REQUIRE(id_of(q.pop(kNow, dropped, refuse_all_groups)) == 3);  // parks 4, 2 and 1
    REQUIRE(q.pop(kNow, dropped) == nullptr);
    REQUIRE(q.size() == 3);

    CHECK(q.unpark(1));
    CHECK(q.size() == 3);
    CHECK(q.size(Priority::normal) == 3);
    CHECK(id_of(q.pop(kNow, dropped)) == 2);
    CHECK(q.size(Priority::normal) == 2);
    CHECK(q.pop(kNow, dropped) == nullptr);

    CHECK(q.unpark(1));
    CHECK(id_of(q.pop(kNow, dropped)) == 1);
    CHECK_FALSE(q.unpark(1));

    CHECK(q.unpark(2));
    CHECK(id_of(q.pop(kNow, dropped)) == 4);
    CHECK(q.empty());
    CHECK(q.size(Priority::normal) == 0);
    CHECK(dropped.empty());
  }

  TEST_CASE("an unparked item is served in deadline order among its class") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{12s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::normal, TimePoint{13s}), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 2);  // parks 1
    REQUIRE(q.admit(jobs.add(3, Priority::normal, TimePoint{11s}), kNow).admitted());
    REQUIRE(q.admit(jobs.add(4, Priority::normal, TimePoint{14s}), kNow).admitted());
    REQUIRE(q.unpark(1));

    CHECK(pop_all(q, kNow, dropped) == std::vector<int>{3, 1, 4});
  }

  TEST_CASE("unpark of group zero or a group that never parked anything returns false") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    CHECK_FALSE(q.unpark(0));
    CHECK_FALSE(q.unpark(1));
    REQUIRE(q.admit(jobs.add(1, Priority::normal, TimePoint{12s}, 0ms, 2), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(q.pop(kNow, dropped, [](std::uint32_t) { return false; }) == nullptr);
    CHECK_FALSE(q.unpark(0));
    CHECK_FALSE(q.unpark(1));
    CHECK_FALSE(q.unpark(3));
    CHECK(q.unpark(2));
  }

  TEST_CASE("parking items of a new group keeps the items parked for earlier groups") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 64, .workers = 1, .min_useful = 1ms}};
    auto refuse_all_groups = [](std::uint32_t) { return false; };
    std::vector<DroppedItem> dropped;
    // Park a few items of group 1 first, then of ever higher groups, so the parked groups grow.
    for (int i = 0; i < 4; ++i) {
      REQUIRE(q.admit(jobs.add(100 + i, Priority::normal, TimePoint{20s + std::chrono::seconds{i}},
                               0ms, 1),
                      kNow)
                  .admitted());
    }
    REQUIRE(q.pop(kNow, dropped, refuse_all_groups) == nullptr);
    for (std::uint32_t group = 2; group <= 20; ++group) {
      REQUIRE(q.admit(jobs.add(static_cast<int>(group), Priority::normal, TimePoint{30s}, 0ms,
                               group),
                      kNow)
                  .admitted());
      REQUIRE(q.pop(kNow, dropped, refuse_all_groups) == nullptr);
    }
    REQUIRE(q.size() == 23);

    CHECK(q.earliest_deadline() == Deadline::at(TimePoint{20s}));
    for (int i = 0; i < 4; ++i) {
      CHECK(q.unpark(1));
      CHECK(id_of(q.pop(kNow, dropped)) == 100 + i);
    }
    CHECK_FALSE(q.unpark(1));
    CHECK(q.unpark(20));
    CHECK(id_of(q.pop(kNow, dropped)) == 20);
    CHECK(q.size() == 18);
    CHECK(dropped.empty());
  }

  TEST_CASE("work_ahead sums the estimates of a class and every class above it") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 16, .workers = 4, .min_useful = 1ms}};
    CHECK(q.work_ahead(Priority::sheddable) == Duration::zero());
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint{100s}, 1ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::critical, TimePoint{100s}, 2ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(3, Priority::high, TimePoint{100s}, 10ms), kNow).admitted());
    Job& normal = jobs.add(4, Priority::normal, TimePoint{100s}, 100ms);
    REQUIRE(q.admit(normal, kNow).admitted());
    REQUIRE(q.admit(jobs.add(5, Priority::sheddable, TimePoint{100s}, 1000ms), kNow).admitted());
    REQUIRE(q.admit(jobs.add(6, Priority::high, TimePoint{99s}, 20ms, 1), kNow).admitted());

    CHECK(q.work_ahead(Priority::critical) == 3ms);
    CHECK(q.work_ahead(Priority::high) == 33ms);
    CHECK(q.work_ahead(Priority::normal) == 133ms);
    CHECK(q.work_ahead(Priority::sheddable) == 1133ms);

    SUBCASE("parked items still count") {
      std::vector<DroppedItem> dropped;
      REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 1);
      REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 2);
      REQUIRE(id_of(q.pop(kNow, dropped, refuse_group_1)) == 3);  // parks 6 on the way
      CHECK(q.work_ahead(Priority::high) == 20ms);
      CHECK(q.work_ahead(Priority::sheddable) == 1120ms);
    }
    SUBCASE("a removed item no longer counts") {
      REQUIRE(q.remove(normal));
      CHECK(q.work_ahead(Priority::high) == 33ms);
      CHECK(q.work_ahead(Priority::normal) == 33ms);
      CHECK(q.work_ahead(Priority::sheddable) == 1033ms);
    }
    SUBCASE("a shed item no longer counts") {
      Jobs more;
      DeadlineQueue small{{.capacity = 2, .workers = 1, .min_useful = 1ms}};
      REQUIRE(small.admit(more.add(1, Priority::sheddable, TimePoint{100s}, 7ms), kNow)
                  .admitted());
      REQUIRE(small.admit(more.add(2, Priority::normal, TimePoint{100s}, 5ms), kNow).admitted());
      const Admission a = small.admit(more.add(3, Priority::high, TimePoint{100s}, 3ms), kNow);
      REQUIRE(id_of(a.shed) == 1);
      CHECK(small.work_ahead(Priority::sheddable) == 8ms);
    }
  }

  TEST_CASE("work_ahead saturates instead of overflowing") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    const Duration huge = Duration::max() / 2 + 1ns;
    // A deadline that never comes admits any estimate: the prediction saturates at it.
    REQUIRE(q.admit(jobs.add(1, Priority::critical, TimePoint::max(), huge), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::high, TimePoint::max(), huge), kNow).admitted());
    CHECK(q.work_ahead(Priority::critical) == huge);
    CHECK(q.work_ahead(Priority::high) == Duration::max());
    CHECK(q.work_ahead(Priority::sheddable) == Duration::max());
  }

  TEST_CASE("a full queue sheds a parked item of a lower class too") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 2, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{20s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::sheddable, TimePoint{30s}, 0ms, 1), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(q.pop(kNow, dropped, refuse_group_1) == nullptr);  // both parked now
    Job& critical = jobs.add(3, Priority::critical, TimePoint{15s});
    const Admission a = q.admit(critical, kNow);
    CHECK(a.admitted());
    CHECK(id_of(a.shed) == 2);  // the latest parked sheddable one
    CHECK(q.size() == 2);
    CHECK(q.size(Priority::sheddable) == 1);
  }

  TEST_CASE("unpark returns the most urgent parked item: highest class first") {
    Jobs jobs;
    DeadlineQueue q{{.capacity = 8, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(jobs.add(1, Priority::sheddable, TimePoint{11s}, 0ms, 1), kNow).admitted());
    REQUIRE(q.admit(jobs.add(2, Priority::critical, TimePoint{30s}, 0ms, 1), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(q.pop(kNow, dropped, refuse_group_1) == nullptr);
    REQUIRE(q.unpark(1));
    CHECK(id_of(q.pop(kNow, dropped)) == 2);
    REQUIRE(q.unpark(1));
    CHECK(id_of(q.pop(kNow, dropped)) == 1);
  }
}

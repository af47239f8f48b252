// The admission rule of DeadlineQueue (deadline_queue.hpp): the prediction follows the order
// pop serves, promises made to queued items are kept, bulkheads divide by their limit and never
// strand parked items, and items leave at their latest useful start. Time is injected.
#include <sandglass/deadline_queue.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <deque>
#include <random>
#include <set>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
using sandglass::Admission;
using sandglass::Deadline;
using sandglass::DeadlineQueue;
using sandglass::DroppedItem;
using sandglass::Duration;
using sandglass::Load;
using sandglass::Priority;
using sandglass::QueueItem;
using sandglass::Reason;
using sandglass::TimePoint;

namespace {

const TimePoint kNow{10s};

struct Item : QueueItem {
  int id = 0;
};

// Owns the test's items; a deque never moves them. Declare it before the queue.
class Items {
 public:
  Item& add(int id, Priority priority, TimePoint deadline, Duration estimate,
            Duration work = Duration::zero(), std::uint32_t group = 0) {
    Item& item = items_.emplace_back();
    item.id = id;
    item.priority = priority;
    item.deadline = Deadline::at(deadline);
    item.estimate = estimate;
    item.work = work;
    item.group = group;
    return item;
  }

 private:
  std::deque<Item> items_;
};

int id_of(const QueueItem* item) { return item == nullptr ? -1 : static_cast<const Item*>(item)->id; }

std::vector<int> ids_of(const std::vector<DroppedItem>& dropped) {
  std::vector<int> ids;
  for (const DroppedItem& d : dropped) ids.push_back(id_of(d.item));
  return ids;
}

std::vector<Reason> reasons_of(const std::vector<DroppedItem>& dropped) {
  std::vector<Reason> reasons;
  for (const DroppedItem& d : dropped) reasons.push_back(d.reason);
  return reasons;
}

// Runs q.expire(now) and checks it against `model` (entries with `item` and `drop`, its latest
// start): it removes exactly the items whose drop time passed, which leave the model, and
// next_drop_time names the earliest left. Returns how many it removed.
template <typename Modelled>
int expire_as_modelled(DeadlineQueue& q, std::vector<Modelled>& model, TimePoint now) {
  std::vector<DroppedItem> dropped;
  q.expire(now, dropped);
  std::set<int> due;
  for (const Modelled& m : model) {
    if (m.drop < now) due.insert(m.item->id);
  }
  const std::vector<int> ids = ids_of(dropped);
  CHECK(std::set<int>(ids.begin(), ids.end()) == due);
  CHECK(ids.size() == due.size());
  std::erase_if(model, [&](const Modelled& m) { return due.count(m.item->id) != 0; });
  REQUIRE(q.size() == model.size());
  if (!model.empty()) {
    TimePoint earliest = TimePoint::max();
    for (const Modelled& m : model) earliest = std::min(earliest, m.drop);
    CHECK(q.next_drop_time() == Deadline::at(earliest + sandglass::Duration{1}));
  } else {
    CHECK(q.next_drop_time().is_never());
  }
  return static_cast<int>(due.size());
}

}  // namespace

TEST_SUITE("DeadlineQueue admission") {
  TEST_CASE("urgent items overtaking a hundred long-deadline items of their class are admitted") {
    Items items;
    DeadlineQueue q{{.capacity = 256, .workers = 2, .min_useful = 1ms}};
    for (int i = 0; i < 100; ++i) {
      REQUIRE(q.admit(items.add(i, Priority::normal, kNow + 10s, 50ms), kNow).admitted());
    }
    // Both workers busy for another 40 ms; five urgent items of 5 ms each, 300 ms budgets.
    const Load load{.busy_for = 40ms};
    for (int i = 0; i < 5; ++i) {
      Item& urgent = items.add(100 + i, Priority::normal, kNow + 300ms, 5ms);
      CHECK(q.predicted_start(urgent, kNow, load) == kNow + 40ms + i * Duration{5ms} / 2);
      CHECK(q.admit(urgent, kNow, load).reason == Reason::ok);
    }
    std::vector<DroppedItem> dropped;
    for (int i = 0; i < 5; ++i) CHECK(id_of(q.pop(kNow, dropped)) == 100 + i);
    CHECK(id_of(q.pop(kNow, dropped)) == 0);
    CHECK(dropped.empty());
  }

  TEST_CASE("work ahead is higher classes plus the newcomer's class up to its deadline, ties "
            "included") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(items.add(1, Priority::critical, kNow + 5s, 30ms), kNow).admitted());
    REQUIRE(q.admit(items.add(2, Priority::normal, kNow + 1s, 20ms), kNow).admitted());
    REQUIRE(q.admit(items.add(3, Priority::normal, kNow + 2s, 7ms), kNow).admitted());
    REQUIRE(q.admit(items.add(4, Priority::normal, kNow + 3s, 100ms), kNow).admitted());
    REQUIRE(q.admit(items.add(5, Priority::sheddable, kNow + 200s, 1s), kNow).admitted());

    CHECK(q.predicted_start(items.add(10, Priority::high, kNow + 1s, 1ms), kNow) == kNow + 30ms);
    CHECK(q.predicted_start(items.add(11, Priority::normal, kNow + 500ms, 1ms), kNow) ==
          kNow + 30ms);
    // Equal deadlines run first: they arrived earlier.
    CHECK(q.predicted_start(items.add(12, Priority::normal, kNow + 2s, 1ms), kNow) ==
          kNow + 57ms);
    CHECK(q.predicted_start(items.add(13, Priority::sheddable, kNow + 1ms, 1ms), kNow) ==
          kNow + 157ms);
  }

  TEST_CASE("work ahead counts each item's central work, the newcomer's own fit its tail "
            "estimate") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    // Three items of tail 50 ms but median 10 ms: 30 ms ahead, not 150 ms.
    for (int i = 0; i < 3; ++i) {
      REQUIRE(q.admit(items.add(i, Priority::normal, kNow + 1s, 50ms, 10ms), kNow).admitted());
    }
    CHECK(q.work_ahead(Priority::normal) == 30ms);
    // 100 ms before their deadline: 30 ms ahead + a 70 ms tail fits exactly; 1 ns more does not.
    const TimePoint later = kNow + 900ms;
    CHECK(q.admit(items.add(3, Priority::normal, kNow + 1s, 70ms + 1ns, 1ms), later).reason ==
          Reason::deadline_implausible);
    CHECK(q.admit(items.add(4, Priority::normal, kNow + 1s, 70ms, 1ms), later).reason ==
          Reason::ok);
  }

  TEST_CASE("running work delays the newcomer by how long until a worker frees") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 2, .min_useful = 1ms}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 50ms, 20ms), kNow).admitted());
    const Load load{.busy_for = 30ms};
    // 20 ms ÷ 2 + 30 ms + 60 ms = 100 ms.
    CHECK(q.admit(items.add(2, Priority::normal, kNow + 100ms - 1ns, 60ms), kNow, load).reason ==
          Reason::deadline_implausible);
    CHECK(q.admit(items.add(3, Priority::normal, kNow + 100ms, 60ms), kNow, load).reason ==
          Reason::ok);
  }

  TEST_CASE("a deadline_implausible admission carries the predicted start it compared") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 100ms, 50ms), kNow).admitted());
    SUBCASE("predicted to finish after its deadline") {
      Item& late = items.add(2, Priority::normal, kNow + 120ms, 80ms);
      const Admission a = q.admit(late, kNow, Load{.busy_for = 5ms});
      REQUIRE(a.reason == Reason::deadline_implausible);
      CHECK(a.predicted_start == kNow + 55ms);  // 50 ms queued + 5 ms running
      CHECK(a.predicted_start == q.predicted_start(late, kNow, Load{.busy_for = 5ms}));
    }
    SUBCASE("fits, but would push a queued item past its latest start") {
      Item& pushy = items.add(2, Priority::normal, kNow + 60ms, 55ms);
      const Admission a = q.admit(pushy, kNow);
      REQUIRE(a.reason == Reason::deadline_implausible);
      CHECK(a.predicted_start == kNow);  // it would go first
    }
  }

  TEST_CASE("a newcomer is rejected when it would push an item of its class past its latest "
            "start") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    // A: deadline +100 ms, 50 ms: latest start +50 ms.
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 100ms, 50ms), kNow).admitted());
    // B goes before A: A's start moves to +30 ms, still before +50 ms.
    REQUIRE(q.admit(items.add(2, Priority::normal, kNow + 60ms, 30ms), kNow).admitted());
    // C would go before both: B's start would be +30 ms (its latest: +30 ms, kept), but A's
    // +60 ms, after its latest start.
    Item& c = items.add(3, Priority::normal, kNow + 55ms, 30ms);
    CHECK(q.admit(c, kNow).reason == Reason::deadline_implausible);
    CHECK(q.size() == 2);
    // One of 20 ms fits: A then starts at +50 ms exactly.
    CHECK(q.admit(items.add(4, Priority::normal, kNow + 55ms, 20ms), kNow).reason == Reason::ok);

    SUBCASE("a higher class may overtake; the item pushed past its latest start leaves then") {
      REQUIRE(q.admit(items.add(5, Priority::critical, kNow + 55ms, 30ms), kNow).admitted());
      CHECK(q.next_drop_time() == Deadline::at(kNow + 25ms + 1ns));  // the critical one's
      // It runs first; D (latest start +35 ms) next; B and A then start too late.
      std::vector<DroppedItem> dropped;
      CHECK(id_of(q.pop(kNow, dropped)) == 5);
      CHECK(id_of(q.pop(kNow + 30ms, dropped)) == 4);
      CHECK(q.pop(kNow + 50ms + 1ns, dropped) == nullptr);
      CHECK(ids_of(dropped) == std::vector<int>{2, 1});
      CHECK(reasons_of(dropped) ==
            std::vector<Reason>{Reason::too_late_to_start, Reason::too_late_to_start});
    }
    SUBCASE("the rule is per class: a sheddable newcomer is not held back by normal promises") {
      CHECK(q.admit(items.add(5, Priority::sheddable, kNow + 200ms, 10ms), kNow).reason ==
            Reason::ok);
    }
  }

  TEST_CASE("an item already predicted to start late does not block newcomers") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 100ms, 50ms), kNow).admitted());
    // 45 ms until the worker frees: A (latest start +50 ms) is on time, and a 10 ms newcomer
    // ahead of it would make it late.
    const Load shorter{.busy_for = 45ms};
    CHECK(q.admit(items.add(2, Priority::normal, kNow + 80ms, 10ms), kNow, shorter).reason ==
          Reason::deadline_implausible);
    // 60 ms: A is already predicted late, and no longer holds newcomers back.
    const Load load{.busy_for = 60ms};
    CHECK(q.admit(items.add(3, Priority::normal, kNow + 90ms, 10ms), kNow, load).reason ==
          Reason::ok);
  }

  TEST_CASE("a bulkhead's work ahead is divided by its limit, not by all workers") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 4, .min_useful = 1ms, .group_limits = {1, 2}}};
    for (int i = 0; i < 3; ++i) {
      REQUIRE(q.admit(items.add(i, Priority::normal, kNow + 1s, 30ms, 30ms, 1), kNow).admitted());
    }
    REQUIRE(q.admit(items.add(3, Priority::normal, kNow + 1s, 40ms, 40ms, 2), kNow).admitted());
    REQUIRE(q.admit(items.add(4, Priority::normal, kNow + 1s, 40ms, 40ms, 2), kNow).admitted());
    const Load load{.busy_for = 0ms, .group_busy_for = 5ms};
    // Group 1: 90 ms ÷ 1 + 5 ms; group 2: 80 ms ÷ 2 + 5 ms; ungrouped: 170 ms ÷ 4.
    CHECK(q.predicted_start(items.add(10, Priority::normal, kNow + 2s, 1ms, 1ms, 1), kNow, load) ==
          kNow + 95ms);
    CHECK(q.predicted_start(items.add(11, Priority::normal, kNow + 2s, 1ms, 1ms, 2), kNow, load) ==
          kNow + 45ms);
    CHECK(q.predicted_start(items.add(12, Priority::normal, kNow + 2s, 1ms), kNow, load) ==
          kNow + Duration{170ms} / 4);
    // 100 ms before the queued items' deadlines: a group 1 newcomer behind them starts at
    // +95 ms and needs 30 ms.
    const TimePoint later = kNow + 900ms;
    CHECK(q.admit(items.add(13, Priority::normal, kNow + 1s + 25ms - 1ns, 30ms, 30ms, 1), later,
                  load).reason == Reason::deadline_implausible);
    CHECK(q.admit(items.add(14, Priority::normal, kNow + 1s + 25ms, 30ms, 30ms, 1), later,
                  load).reason == Reason::ok);
  }

  TEST_CASE("parked items of a bulkhead count in its prediction in the order they will run") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 2, .min_useful = 1ms, .group_limits = {1}}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 1s, 30ms, 30ms, 1), kNow).admitted());
    REQUIRE(q.admit(items.add(2, Priority::normal, kNow + 5s, 30ms, 30ms, 1), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(q.pop(kNow, dropped, [](std::uint32_t) { return false; }) == nullptr);  // parks both
    REQUIRE(q.parked(1) == 2);
    // Before the 5 s one, after the 1 s one.
    CHECK(q.predicted_start(items.add(3, Priority::normal, kNow + 2s, 1ms, 1ms, 1), kNow) ==
          kNow + 30ms);
  }

  TEST_CASE("when an unparked item is dropped the group's next parked item is handed out at once") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 2, .min_useful = 1ms, .group_limits = {1}}};
    bool slot_free = false;
    auto can_start = [&](std::uint32_t) { return slot_free; };
    // A holds the slot. B (40 ms budget, 30 ms) and C, D (5 s budgets) are parked.
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 5s, 30ms, 30ms, 1), kNow).admitted());
    std::vector<DroppedItem> dropped;
    slot_free = true;
    REQUIRE(id_of(q.pop(kNow, dropped, can_start)) == 1);
    slot_free = false;
    Item& b = items.add(2, Priority::normal, kNow + 40ms, 30ms, 30ms, 1);
    REQUIRE(q.admit(b, kNow).admitted());
    REQUIRE(q.admit(items.add(3, Priority::normal, kNow + 5s, 30ms, 30ms, 1), kNow).admitted());
    REQUIRE(q.admit(items.add(4, Priority::normal, kNow + 5s, 30ms, 30ms, 1), kNow).admitted());
    REQUIRE(q.pop(kNow, dropped, can_start) == nullptr);
    REQUIRE(q.parked(1) == 3);

    SUBCASE("dropped at pop: too late to start when the slot frees") {
      slot_free = true;  // A finished 20 ms later: B has 20 ms left, needs 30 ms
      CHECK(id_of(q.pop(kNow + 20ms, dropped, can_start)) == 3);
      CHECK(ids_of(dropped) == std::vector<int>{2});
      CHECK(reasons_of(dropped) == std::vector<Reason>{Reason::too_late_to_start});
      CHECK(id_of(q.pop(kNow + 20ms, dropped, can_start)) == 4);
    }
    SUBCASE("expired while parked, then the slot frees") {
      q.expire(kNow + 40ms, dropped);
      CHECK(ids_of(dropped) == std::vector<int>{2});
      slot_free = true;
      CHECK(id_of(q.pop(kNow + 40ms, dropped, can_start)) == 3);
    }
    SUBCASE("removed after it was unparked") {
      REQUIRE(q.unpark(1));  // B, the most urgent
      CHECK(q.remove(b));    // cancelled
      slot_free = true;
      CHECK(id_of(q.pop(kNow + 1ms, dropped, can_start)) == 3);
      CHECK(dropped.empty());
    }
  }

  TEST_CASE("the timer's expire removes an item at its latest useful start") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms, .group_limits = {1}}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 100ms, 30ms), kNow).admitted());
    REQUIRE(q.admit(items.add(2, Priority::high, kNow + 200ms, 10ms, 10ms, 1), kNow).admitted());
    REQUIRE(q.admit(items.add(3, Priority::normal, kNow + 50ms, 0ms), kNow).admitted());
    std::vector<DroppedItem> dropped;
    REQUIRE(id_of(q.pop(kNow, dropped, [](std::uint32_t) { return false; })) == 3);  // parks 2
    CHECK(q.next_drop_time() == Deadline::at(kNow + 70ms + 1ns));

    q.expire(kNow + 70ms, dropped);
    CHECK(dropped.empty());
    q.expire(kNow + 70ms + 1ns, dropped);
    CHECK(ids_of(dropped) == std::vector<int>{1});
    CHECK(reasons_of(dropped) == std::vector<Reason>{Reason::too_late_to_start});
    CHECK(q.next_drop_time() == Deadline::at(kNow + 190ms + 1ns));  // the parked one
    q.expire(kNow + 190ms + 1ns, dropped);
    CHECK(ids_of(dropped) == std::vector<int>{1, 2});
    CHECK(q.empty());
  }

  TEST_CASE("without drop_if_cannot_finish items leave only at their deadline") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1, .min_useful = 1ms, .drop_if_cannot_finish = false}};
    REQUIRE(q.admit(items.add(1, Priority::normal, kNow + 100ms, 30ms), kNow).admitted());
    CHECK(q.next_drop_time() == Deadline::at(kNow + 100ms));
    std::vector<DroppedItem> dropped;
    q.expire(kNow + 99ms, dropped);
    CHECK(dropped.empty());
    q.expire(kNow + 100ms, dropped);
    CHECK(reasons_of(dropped) == std::vector<Reason>{Reason::expired_in_queue});
  }

  TEST_CASE("a mixed queue of classes, budgets and groups pops in class then deadline order") {
    Items items;
    DeadlineQueue q{{.capacity = 64, .workers = 3, .min_useful = 1ms, .group_limits = {2}}};
    const Priority classes[] = {Priority::sheddable, Priority::normal, Priority::high,
                                Priority::critical};
    for (int i = 0; i < 40; ++i) {
      const Priority p = classes[(i * 7) % 4];
      const TimePoint deadline = kNow + 10s + std::chrono::milliseconds{(i * 37) % 23};
      REQUIRE(q.admit(items.add(i, p, deadline, 1ms, 1ms, i % 5 == 0 ? 1 : 0), kNow).admitted());
    }
    std::vector<DroppedItem> dropped;
    const QueueItem* last = nullptr;
    int popped = 0;
    while (const QueueItem* item = q.pop(kNow, dropped)) {
      if (last != nullptr) {
        CHECK((last->priority < item->priority ||
               (last->priority == item->priority && last->deadline <= item->deadline)));
      }
      last = item;
      ++popped;
    }
    CHECK(popped == 40);
    CHECK(q.empty());
    CHECK(q.work_ahead(Priority::sheddable) == Duration::zero());
  }

  TEST_CASE("the in-order run predicts, pops and drops exactly as the EDF order, whatever the arrival order") {
    // Mostly in-order arrivals (the run), some that overtake part of it (it moves into the
    // tree), removals and pops, in three classes; a brute-force model of the EDF order checks
    // every prediction and every pop, then which items a late expire drops.
    struct Modelled {
      Item* item;
      std::uint64_t seq;
      Duration work;
    };
    for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
      CAPTURE(seed);
      std::mt19937 rng{seed};
      Items items;
      DeadlineQueue q{{.capacity = 4096, .workers = 2}};
      std::vector<Modelled> model;
      std::uint64_t seq = 0;
      std::array<TimePoint, 3> last{kNow + 1s, kNow + 1s, kNow + 1s};
      auto in = [&](std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>{0, n - 1}(rng); };
      auto before = [](const Modelled& a, const Modelled& b) {
        return std::tie(a.item->priority, a.item->deadline, a.seq) <
               std::tie(b.item->priority, b.item->deadline, b.seq);
      };
      for (int step = 0; step < 1500; ++step) {
        const std::uint32_t op = in(10);
        if (op < 8 || model.empty()) {
          const std::uint32_t cls = in(3);
          TimePoint deadline;
          if (op == 7) {
            deadline = kNow + 1s + in(400) * 1ms;  // anywhere: may overtake the run
          } else {
            deadline = last[cls] + in(3) * 1ms;    // in order (ties included)
          }
          last[cls] = std::max(last[cls], deadline);
          const Duration work = (1 + in(10)) * 100us;
          const Duration estimate = (1 + in(50)) * 100us;  // latest starts out of order at times
          Item& item = items.add(step, static_cast<Priority>(cls), deadline, estimate, work);
          std::int64_t ahead = 0;
          for (const Modelled& m : model) {
            if (m.item->priority < item.priority ||
                (m.item->priority == item.priority && m.item->deadline <= item.deadline)) {
              ahead += std::chrono::nanoseconds{m.work}.count();
            }
          }
          CHECK(q.predicted_start(item, kNow) == kNow + std::chrono::nanoseconds{ahead / 2});
          REQUIRE(q.admit(item, kNow).admitted());
          model.push_back({&item, ++seq, work});
        } else if (op == 8) {
          const std::size_t victim = in(static_cast<std::uint32_t>(model.size()));
          CHECK(q.remove(*model[victim].item));
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(victim));
        } else {
          std::vector<DroppedItem> dropped;
          QueueItem* popped = q.pop(kNow, dropped);
          const auto first = std::min_element(model.begin(), model.end(), before);
          CHECK(dropped.empty());
          CHECK(id_of(popped) == first->item->id);
          model.erase(first);
        }
        REQUIRE(q.size() == model.size());
      }
      // Late: every item whose latest useful start (deadline − estimate) passed leaves.
      const TimePoint late = kNow + 1s + 300ms;
      std::set<int> due;
      for (const Modelled& m : model) {
        if (m.item->deadline.time_point() - m.item->estimate < late) due.insert(m.item->id);
      }
      std::vector<DroppedItem> dropped;
      q.expire(late, dropped);
      const std::vector<int> ids = ids_of(dropped);
      CHECK(std::set<int>(ids.begin(), ids.end()) == due);
      CHECK(ids.size() == due.size());
      CHECK(q.size() == model.size() - due.size());
      CHECK(q.next_drop_time() > Deadline::at(late));
    }
  }

  TEST_CASE("a newcomer that overtakes a tree item after the in-order run counts the run's work against that item's promise") {
    Items items;
    DeadlineQueue q{{.capacity = 16, .workers = 1}};
    // A goes to the run; B comes after it by deadline but not by latest start (200 - 150 = 50 ms
    // before A's 99 ms), so it goes to the tree. B is predicted to start at 40 ms (after A's
    // work), its latest start is 50 ms.
    Item& a = items.add(1, Priority::normal, kNow + 100ms, 1ms, 40ms);
    Item& b = items.add(2, Priority::normal, kNow + 200ms, 150ms, 10ms);
    REQUIRE(q.admit(a, kNow).admitted());
    REQUIRE(q.admit(b, kNow).admitted());
    // C would start B at 40 + 15 = 55 ms, past its latest start: refused. D (5 ms) keeps it.
    Item& c = items.add(3, Priority::normal, kNow + 150ms, 1ms, 15ms);
    CHECK(q.predicted_start(c, kNow) == kNow + 40ms);
    CHECK(q.admit(c, kNow).reason == Reason::deadline_implausible);
    Item& d = items.add(4, Priority::normal, kNow + 150ms, 1ms, 5ms);
    CHECK(q.admit(d, kNow).admitted());
    std::vector<DroppedItem> dropped;
    CHECK(id_of(q.pop(kNow, dropped)) == 1);
    CHECK(id_of(q.pop(kNow, dropped)) == 4);
    CHECK(id_of(q.pop(kNow, dropped)) == 2);
    CHECK(dropped.empty());
  }

  TEST_CASE("newcomers a few items out of deadline order decide, pop and drop as a brute-force EDF "
            "model, with the promises they would break refused") {
    // Arrivals as concurrent submitters make them: each deadline a little before or after the
    // last one, so most overtake a few items at the run's end (they join the run there when the
    // drop times stay in order, else those items go to the tree). Tight estimates make some
    // newcomers break a queued item's promise (refused), or miss their own deadline. The model
    // decides every admission from the EDF order alone.
    struct Modelled {
      Item* item;
      std::uint64_t seq;
    };
    auto counted = [](const Item& i) {
      return std::chrono::nanoseconds{i.work > Duration::zero() ? i.work : i.estimate}.count();
    };
    for (std::uint32_t seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
      CAPTURE(seed);
      std::mt19937 rng{seed};
      Items items;
      constexpr std::int64_t kWorkers = 2;
      DeadlineQueue q{{.capacity = 4096, .workers = kWorkers}};
      std::vector<Modelled> model;
      std::uint64_t seq = 0;
      std::array<TimePoint, 2> last{kNow + 200ms, kNow + 200ms};
      auto in = [&](std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>{0, n - 1}(rng); };
      auto before = [](const Modelled& a, const Modelled& b) {
        return std::tie(a.item->priority, a.item->deadline, a.seq) <
               std::tie(b.item->priority, b.item->deadline, b.seq);
      };
      int admitted = 0;
      int refused_promise = 0;
      int refused_own = 0;
      for (int step = 0; step < 3000; ++step) {
        const std::uint32_t op = in(20);
        if (op < 17 || model.empty()) {
          const std::uint32_t cls = in(5) == 0 ? 0 : 1;
          // Within ±4 ms of the class's latest deadline, which keeps growing.
          const TimePoint deadline = last[cls] + in(9) * 1ms - 4ms + 1ms * (in(4) == 0 ? 1 : 0);
          last[cls] = std::max(last[cls], deadline);
          // About as much work per arrival (÷ 2 workers) as the deadlines grow: the queue
          // fills up to where newcomers start to miss.
          const Duration work = (1 + in(60)) * 100us;
          const Duration estimate = (1 + in(40)) * 1ms;
          Item& item = items.add(step, static_cast<Priority>(cls), deadline, estimate, work);
          // The model: work ahead, and the tightest promise among the items it overtakes.
          std::int64_t ahead = 0;
          for (const Modelled& m : model) {
            if (m.item->priority < item.priority ||
                (m.item->priority == item.priority && m.item->deadline <= item.deadline)) {
              ahead += counted(*m.item);
            }
          }
          const TimePoint start = kNow + std::chrono::nanoseconds{ahead / kWorkers};
          const bool own_late = start + item.estimate > item.deadline.time_point();
          std::int64_t tightest = std::numeric_limits<std::int64_t>::max();
          for (const Modelled& x : model) {
            if (x.item->priority != item.priority || x.item->deadline <= item.deadline) continue;
            std::int64_t before_x = 0;
            for (const Modelled& m : model) {
              if (m.item->priority < x.item->priority ||
                  (m.item->priority == x.item->priority && before(m, x))) {
                before_x += counted(*m.item);
              }
            }
            const std::int64_t latest = std::chrono::nanoseconds{
                x.item->deadline.time_point() - x.item->estimate - kNow}.count();
            tightest = std::min(tightest, latest * kWorkers - before_x);
          }
          const bool breaks = tightest != std::numeric_limits<std::int64_t>::max() &&
                              tightest >= 0 && tightest < counted(item);
          const Admission a = q.admit(item, kNow);
          if (own_late || breaks) {
            CHECK(a.reason == Reason::deadline_implausible);
            (own_late ? refused_own : refused_promise) += 1;
          } else {
            REQUIRE(a.admitted());
            model.push_back({&item, ++seq});
            ++admitted;
          }
        } else if (op < 18) {
          const std::size_t victim = in(static_cast<std::uint32_t>(model.size()));
          CHECK(q.remove(*model[victim].item));
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(victim));
        } else {
          std::vector<DroppedItem> dropped;
          QueueItem* popped = q.pop(kNow, dropped);
          const auto first = std::min_element(model.begin(), model.end(), before);
          CHECK(dropped.empty());
          CHECK(id_of(popped) == first->item->id);
          model.erase(first);
        }
        REQUIRE(q.size() == model.size());
      }
      // Every kind of decision happened.
      CAPTURE(admitted);
      CAPTURE(refused_promise);
      CAPTURE(refused_own);
      CHECK(admitted > 100);
      CHECK(refused_promise > 0);
      CHECK(refused_own > 0);
      // Late: every item whose latest useful start passed leaves, earliest first.
      const TimePoint late = last[1] - 100ms;
      std::set<int> due;
      for (const Modelled& m : model) {
        if (m.item->deadline.time_point() - m.item->estimate < late) due.insert(m.item->id);
      }
      std::vector<DroppedItem> dropped;
      q.expire(late, dropped);
      const std::vector<int> ids = ids_of(dropped);
      CHECK(std::set<int>(ids.begin(), ids.end()) == due);
      CHECK(ids.size() == due.size());
      CHECK(q.size() == model.size() - due.size());
      // What is left pops in EDF order.
      std::sort(model.begin(), model.end(), before);
      for (const Modelled& m : model) {
        if (due.count(m.item->id) != 0) continue;
        std::vector<DroppedItem> none;
        CHECK(id_of(q.pop(late, none)) == m.item->id);
      }
    }
  }

  TEST_CASE("drop times a few microseconds out of order in the in-order run still leave exactly "
            "at their latest start, and next_drop_time names the earliest") {
    // A tail estimate that moves between submits: deadlines in order, latest starts (deadline −
    // estimate) out of order by up to tens of microseconds. A brute-force model says which
    // items each expire removes and when the next one is due.
    struct Modelled {
      Item* item;
      TimePoint drop;  // its latest start
    };
    for (std::uint32_t seed : {21u, 22u, 23u, 24u}) {
      CAPTURE(seed);
      std::mt19937 rng{seed};
      auto in = [&](std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>{0, n - 1}(rng); };
      Items items;
      DeadlineQueue q{{.capacity = 8192, .workers = 2}};
      std::vector<Modelled> model;
      TimePoint last = kNow;
      TimePoint now = kNow;
      int expired = 0;
      for (int step = 0; step < 4000; ++step) {
        if (in(10) < 8) {
          // In order or a few microseconds early (overtakes a few), estimates jittering by up
          // to 40 µs, at times 120 (more than the run tolerates: then the tree). Latest
          // starts about 100 µs ahead of `now`.
          const Duration estimate = 1ms + (in(8) == 0 ? in(120) : in(40)) * 1us;
          last = std::max(last + in(4) * 5us, now + 1100us);
          const TimePoint deadline = last - (in(6) == 0 ? in(30) * 1us : 0us);
          Item& item = items.add(step, Priority::normal, deadline, estimate, 1us);
          if (q.admit(item, now).admitted()) model.push_back({&item, deadline - estimate});
        } else {
          now += in(60) * 1us;
          expired += expire_as_modelled(q, model, now);
        }
      }
      CHECK(expired > 1000);
    }
  }

  TEST_CASE("tail estimates that jump by milliseconds: the run's items still leave exactly at "
            "their latest start, pop in EDF order, and next_drop_time names the earliest") {
    // Deadlines in order (a few overtake the last items), estimates in regimes that change
    // every few dozen arrivals between 1 ms and up to 9 ms: the latest starts of an arrival
    // fall milliseconds before those queued just before it. Each jump begins a new segment of
    // the run (up to four; then the tree). Pops, removals and expiries interleave; a
    // brute-force model says what each must do.
    struct Modelled {
      Item* item;
      std::uint64_t seq;
      TimePoint drop;  // its latest start
    };
    auto before = [](const Modelled& a, const Modelled& b) {
      return std::tie(a.item->priority, a.item->deadline, a.seq) <
             std::tie(b.item->priority, b.item->deadline, b.seq);
    };
    for (std::uint32_t seed : {31u, 32u, 33u, 34u, 35u, 36u}) {
      CAPTURE(seed);
      std::mt19937 rng{seed};
      auto in = [&](std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>{0, n - 1}(rng); };
      Items items;
      DeadlineQueue q{{.capacity = 8192, .workers = 2}};
      std::vector<Modelled> model;
      std::uint64_t seq = 0;
      std::array<TimePoint, 2> last{kNow, kNow};
      TimePoint now = kNow;
      Duration regime = 1ms;
      int expired = 0;
      int popped = 0;
      for (int step = 0; step < 6000; ++step) {
        const std::uint32_t op = in(20);
        if (in(40) == 0) regime = (1 + in(9)) * 1ms;
        if (op < 14 || model.empty()) {
          const std::uint32_t cls = in(4) == 0 ? 0 : 1;
          const Duration estimate = regime + in(20) * 1us;
          last[cls] = std::max(last[cls] + in(4) * 20us, now + 12ms);
          const TimePoint deadline = last[cls] - (in(8) == 0 ? in(60) * 1us : 0us);
          Item& item = items.add(step, static_cast<Priority>(cls), deadline, estimate, 1us);
          if (q.admit(item, now).admitted()) model.push_back({&item, ++seq, deadline - estimate});
        } else if (op < 15) {
          const std::size_t victim = in(static_cast<std::uint32_t>(model.size()));
          CHECK(q.remove(*model[victim].item));
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(victim));
        } else if (op < 17) {
          // Nothing is due at `now` (expire ran at it): pop gives the EDF first.
          std::vector<DroppedItem> dropped;
          QueueItem* item = q.pop(now, dropped);
          CHECK(dropped.empty());
          const auto first = std::min_element(model.begin(), model.end(), before);
          CHECK(id_of(item) == first->item->id);
          model.erase(first);
          ++popped;
        } else {
          now += in(400) * 1us;
          expired += expire_as_modelled(q, model, now);
        }
        REQUIRE(q.size() == model.size());
      }
      CAPTURE(expired);
      CAPTURE(popped);
      CHECK(expired > 200);
      CHECK(popped > 200);
    }
  }
}

TEST_SUITE("DeadlineQueue standing-queue rule") {
  TEST_CASE("with a limit on the predicted start, later newcomers of mixed classes, budgets and "
            "sizes are refused as beyond the target while urgent ones that overtake are admitted") {
    Items items;
    DeadlineQueue q{{.capacity = 64, .workers = 2}};
    // Without a limit a burst is admitted whole: 10 jobs of 4 ms on 2 workers, 20 ms of queue.
    for (int i = 0; i < 10; ++i) {
      REQUIRE(q.admit(items.add(i, Priority::normal, kNow + 1s + i * 1ms, 4ms), kNow).admitted());
    }
    const Load standing{.start_within = 5ms};
    SUBCASE("a long-budget job behind the queue is predicted to start in 20 ms: refused") {
      const Admission a = q.admit(items.add(20, Priority::normal, kNow + 10s, 1ms), kNow, standing);
      CHECK(a.reason == Reason::queue_full);
      CHECK(a.beyond_target);
      CHECK(a.predicted_start == kNow + 20ms);
      CHECK(q.size() == 10);
    }
    SUBCASE("so is a job of a key without an estimate") {
      const Admission a = q.admit(items.add(21, Priority::normal, kNow + 10s, Duration::zero()), kNow, standing);
      CHECK(a.beyond_target);
    }
    SUBCASE("an urgent job of its class overtakes the queue under EDF: admitted") {
      CHECK(q.admit(items.add(22, Priority::normal, kNow + 100ms, 30ms), kNow, standing).admitted());
    }
    SUBCASE("a job of a higher class starts next: admitted") {
      CHECK(q.admit(items.add(23, Priority::high, kNow + 10s, 500ms), kNow, standing).admitted());
    }
    SUBCASE("a job that cannot finish is still refused as implausible first") {
      const Admission a = q.admit(items.add(24, Priority::normal, kNow + 10s, 10s), kNow, standing);
      CHECK(a.reason == Reason::deadline_implausible);
      CHECK_FALSE(a.beyond_target);
    }
    SUBCASE("the lock-free path declines what the limit refuses, and takes what it admits") {
      const DeadlineQueue::BusyBound idle{[](const void*, TimePoint) noexcept { return Duration::zero(); },
                                          nullptr};
      CHECK_FALSE(q.admit_lock_free(items.add(25, Priority::normal, kNow + 10s, 1ms), kNow, idle, 5ms));
      CHECK(q.admit_lock_free(items.add(26, Priority::normal, kNow + 10s, 1ms), kNow, idle, 30ms));
    }
  }
}

// DeadlineQueue's lock-free admission (deadline_queue.hpp, "The inbox"): what it admits is
// what the locked rule admits, items in the inbox count for later locked decisions, and the
// queue pops inbox items in EDF order. Checked against a brute-force model of the EDF order.
// Time is injected; the one concurrent test synchronises with a latch.
#include <sandglass/deadline_queue.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <latch>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

using namespace std::chrono_literals;
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

struct Item : QueueItem {
  int id = 0;
  std::uint64_t seq = 0;  // the model's arrival order
};

Duration no_busy(const void*, TimePoint) noexcept { return Duration::zero(); }
constexpr DeadlineQueue::BusyBound kIdle{&no_busy, nullptr};

std::int64_t ns(Duration d) { return std::chrono::nanoseconds{d}.count(); }
std::int64_t counted(const Item& x) { return ns(x.work > Duration::zero() ? x.work : x.estimate); }

// The EDF order pop serves, brute force: class, then deadline, then arrival.
bool before(const Item* a, const Item* b) {
  return std::tie(a->priority, a->deadline, a->seq) < std::tie(b->priority, b->deadline, b->seq);
}

// What admit decides for `x` against the queued `model`, with `workers` idle workers, written
// out from the rule in deadline_queue.hpp (implausible, promise, full or shed).
Reason model_decision(const std::vector<Item*>& model, const Item& x, std::int64_t workers,
                      std::size_t capacity, Item*& shed) {
  shed = nullptr;
  std::int64_t ahead = 0;
  for (const Item* m : model) {
    if (m->priority < x.priority || (m->priority == x.priority && m->deadline <= x.deadline)) {
      ahead += counted(*m);
    }
  }
  if (x.estimate > Duration::zero() &&
      kNow + std::chrono::nanoseconds{ahead / workers} + x.estimate > x.deadline.time_point()) {
    return Reason::deadline_implausible;
  }
  // The tightest item of its class it overtakes: latest start × workers − work before it.
  std::int64_t tightest = std::numeric_limits<std::int64_t>::max();
  bool overtakes = false;
  for (const Item* m : model) {
    if (m->priority != x.priority || m->deadline <= x.deadline) continue;
    std::int64_t before_m = 0;
    for (const Item* o : model) {
      if (before(o, m)) before_m += counted(*o);
    }
    const std::int64_t latest = ns(m->deadline.time_point() - m->estimate - kNow) * workers;
    tightest = std::min(tightest, latest - before_m);
    overtakes = true;
  }
  if (counted(x) > 0 && overtakes && tightest >= 0 && tightest < counted(x)) {
    return Reason::deadline_implausible;
  }
  if (model.size() >= capacity) {
    // The latest item of the lowest non-empty class below the newcomer's.
    for (int p = static_cast<int>(Priority::sheddable); p > static_cast<int>(x.priority); --p) {
      for (Item* m : model) {
        if (static_cast<int>(m->priority) == p && (shed == nullptr || before(shed, m))) shed = m;
      }
      if (shed != nullptr) return Reason::ok;
    }
    return Reason::queue_full;
  }
  return Reason::ok;
}

}  // namespace

TEST_SUITE("DeadlineQueue inbox") {
  TEST_CASE("lock-free and locked admissions decide as one EDF queue, inbox items included") {
    // Mixed classes, in-order and overtaking arrivals, deadlines tight enough for rejections,
    // a capacity that sheds; each newcomer tries the lock-free path first and falls back to
    // admit() as the runtime does. Every lock-free admission must be one the model admits;
    // every locked decision must be the model's, with items still in the inbox counted; pops
    // must follow the model's EDF order.
    for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
      CAPTURE(seed);
      std::mt19937 rng{seed};
      auto in = [&](std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>{0, n - 1}(rng); };
      constexpr std::size_t kCapacity = 48;
      std::deque<Item> items;
      DeadlineQueue q{{.capacity = kCapacity, .workers = 2}};
      std::vector<Item*> model;
      std::uint64_t seq = 0;
      std::array<TimePoint, 3> last{kNow + 5ms, kNow + 5ms, kNow + 5ms};
      int lock_free = 0;
      int rejected = 0;
      int shed = 0;
      for (int step = 0; step < 3000; ++step) {
        const std::uint32_t op = in(10);
        if (op < 7 || model.empty()) {
          const std::uint32_t cls = in(3);
          Item& x = items.emplace_back();
          x.id = step;
          x.priority = static_cast<Priority>(cls);
          const TimePoint deadline = op == 6 ? kNow + 2ms + in(60) * 1ms : last[cls] + in(4) * 100us;
          last[cls] = std::max(last[cls], deadline);
          x.deadline = Deadline::at(deadline);
          x.estimate = (1 + in(20)) * 100us;
          x.work = in(2) == 0 ? Duration::zero() : (1 + in(10)) * 100us;
          Item* victim = nullptr;
          const Reason expected = model_decision(model, x, 2, kCapacity, victim);
          x.seq = ++seq;
          if (q.admit_lock_free(x, kNow, kIdle)) {
            ++lock_free;
            REQUIRE(expected == Reason::ok);
            REQUIRE(victim == nullptr);
            model.push_back(&x);
          } else {
            const sandglass::Admission a = q.admit(x, kNow);
            REQUIRE(a.reason == expected);
            if (a.admitted()) model.push_back(&x);
            if (a.shed != nullptr) {
              ++shed;
              REQUIRE(a.shed == victim);
              std::erase(model, victim);
            } else {
              REQUIRE(victim == nullptr);
            }
            rejected += a.admitted() ? 0 : 1;
          }
        } else if (op < 9) {
          std::vector<DroppedItem> dropped;
          QueueItem* popped = q.pop(kNow, dropped);
          CHECK(dropped.empty());
          const auto first = std::min_element(model.begin(), model.end(), before);
          REQUIRE(popped == *first);
          model.erase(first);
        } else {
          Item* victim = model[in(static_cast<std::uint32_t>(model.size()))];
          CHECK(q.remove(*victim));  // in the inbox or linked
          std::erase(model, victim);
        }
        REQUIRE(q.size() == model.size());
      }
      // Every path was taken.
      CHECK(lock_free > 500);
      CHECK(rejected > 50);
      CHECK(shed > 0);
      // What is left pops in the model's order, inbox included.
      std::sort(model.begin(), model.end(), before);
      std::vector<DroppedItem> dropped;
      for (Item* expected : model) REQUIRE(q.pop(kNow, dropped) == expected);
      CHECK(q.empty());
    }
  }

  TEST_CASE("lock_free_may_admit reserves nothing and claim_lock_free then admits as admit_lock_free") {
    std::deque<Item> items;
    DeadlineQueue q{{.capacity = 4, .workers = 1}};
    auto add = [&](Duration budget) -> Item& {
      Item& x = items.emplace_back();
      x.deadline = Deadline::at(kNow + budget);
      x.estimate = 1ms;
      return x;
    };
    Item& first = add(100ms);
    REQUIRE(q.admit_lock_free(first, kNow, kIdle));
    // Would overtake `first`: declined by the plain-load half already.
    CHECK_FALSE(q.lock_free_may_admit(add(50ms), kNow, kIdle));
    Item& later = add(200ms);
    CHECK(q.lock_free_may_admit(later, kNow, kIdle));
    CHECK(q.size() == 1);       // nothing reserved by the check
    CHECK(q.inbox_empty() == false);
    CHECK(q.claim_lock_free(later, kNow, kIdle));
    CHECK(q.size() == 2);
    std::vector<DroppedItem> dropped;
    CHECK(q.pop(kNow, dropped) == &first);
    CHECK(q.pop(kNow, dropped) == &later);
    CHECK(dropped.empty());
  }

  TEST_CASE("the lock-free path declines what only the locked rule may decide") {
    std::deque<Item> items;
    DeadlineQueue q{{.capacity = 2, .workers = 1, .group_limits = {1}}};
    auto add = [&](Priority p, Duration budget, Duration estimate, std::uint32_t group = 0) -> Item& {
      Item& x = items.emplace_back();
      x.priority = p;
      x.deadline = Deadline::at(kNow + budget);
      x.estimate = estimate;
      x.group = group;
      return x;
    };
    CHECK(q.admit_lock_free(add(Priority::normal, 100ms, 1ms), kNow, kIdle));
    std::size_t queued = 1;
    SUBCASE("an item that would overtake one of its class") {
      CHECK_FALSE(q.admit_lock_free(add(Priority::normal, 50ms, 1ms), kNow, kIdle));
    }
    SUBCASE("an item of a bulkhead group") {
      CHECK_FALSE(q.admit_lock_free(add(Priority::normal, 200ms, 1ms, 1), kNow, kIdle));
    }
    SUBCASE("an item with less than min_useful left") {
      CHECK_FALSE(q.admit_lock_free(add(Priority::high, 500us, 0ms), kNow, kIdle));
    }
    SUBCASE("an item that might not fit: the work ahead plus its estimate pass its deadline") {
      CHECK_FALSE(q.admit_lock_free(add(Priority::normal, 100500us, 100ms), kNow, kIdle));
    }
    SUBCASE("an item for which the queue is full") {
      CHECK(q.admit_lock_free(add(Priority::high, 100ms, 1ms), kNow, kIdle));
      queued = 2;
      CHECK_FALSE(q.admit_lock_free(add(Priority::critical, 100ms, 1ms), kNow, kIdle));
    }
    SUBCASE("an item of a closed queue") {
      q.close();
      CHECK_FALSE(q.admit_lock_free(add(Priority::normal, 200ms, 1ms), kNow, kIdle));
    }
    SUBCASE("an item whose deadline equals the latest of its class (arrival order ties)") {
      CHECK_FALSE(q.admit_lock_free(add(Priority::normal, 100ms, 1ms), kNow, kIdle));
    }
    // Declining changed nothing.
    CHECK(q.size() == queued);
  }

  TEST_CASE("items pushed by concurrent submitters are all linked once and pop in EDF order" *
            doctest::timeout(30)) {
    constexpr int kThreads = 4;
    constexpr int kEach = 2000;
    std::vector<std::deque<Item>> items(kThreads);
    DeadlineQueue q{{.capacity = kThreads * kEach, .workers = 2}};
    std::atomic<int> lock_free{0};
    std::latch go{kThreads};
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        go.arrive_and_wait();
        for (int i = 0; i < kEach; ++i) {
          Item& x = items[t].emplace_back();
          x.id = t * kEach + i;
          x.priority = static_cast<Priority>(i % 3);
          x.deadline = Deadline::at(kNow + 1s + (i * kThreads + t) * 1us);
          x.estimate = 1us;
          if (q.admit_lock_free(x, kNow, kIdle)) lock_free.fetch_add(1, std::memory_order_relaxed);
          // The declined ones are left out (admit() needs the owner's lock).
        }
      });
    }
    threads.clear();
    std::vector<DroppedItem> dropped;
    std::vector<const QueueItem*> popped;
    while (QueueItem* x = q.pop(kNow, dropped)) popped.push_back(x);
    CHECK(dropped.empty());
    CHECK(static_cast<int>(popped.size()) == lock_free.load());
    CHECK(lock_free.load() > 0);
    CHECK(std::is_sorted(popped.begin(), popped.end(), [](const QueueItem* a, const QueueItem* b) {
      return std::tie(a->priority, a->deadline) < std::tie(b->priority, b->deadline);
    }));
    CHECK(q.empty());
  }
}

TEST_SUITE("DeadlineQueue inbox") {
  TEST_CASE("a locked admission does not wait for a lock-free one stopped between its "
            "reservation and its push" * doctest::timeout(30)) {
    DeadlineQueue q{{.capacity = 8, .workers = 2}};
    // The lock-free submitter's bound of the running work: its second call comes after its
    // reservation (the first is the plain test before it), and stops there until told to go
    // on, as a submitter preempted there does.
    struct Stop {
      std::atomic<int> calls{0};
      std::latch reserved{1};
      std::latch go{1};
    } stop;
    const DeadlineQueue::BusyBound stopping{
        [](const void* context, TimePoint) noexcept {
          auto& s = *static_cast<Stop*>(const_cast<void*>(context));
          if (s.calls.fetch_add(1) == 1) {
            s.reserved.count_down();
            s.go.wait();
          }
          return Duration::zero();
        },
        &stop};
    Item stopped;
    stopped.deadline = Deadline::at(kNow + 100ms);
    stopped.estimate = 1ms;
    bool admitted_lock_free = false;
    std::thread submitter{[&] { admitted_lock_free = q.admit_lock_free(stopped, kNow, stopping); }};
    stop.reserved.wait();

    // It overtakes the one in flight: the locked way, which declines to wait.
    Item urgent;
    urgent.priority = Priority::high;
    urgent.deadline = Deadline::at(kNow + 50ms);
    urgent.estimate = 1ms;
    CHECK_FALSE(q.try_admit(urgent, kNow).has_value());
    CHECK(q.size() == 1);  // only the reservation in flight: the declined one gave its back
    std::vector<DroppedItem> dropped;
    CHECK(q.pop(kNow, dropped) == nullptr);  // the owner's other work goes on meanwhile

    stop.go.count_down();
    submitter.join();
    REQUIRE(admitted_lock_free);
    const std::optional<sandglass::Admission> decided = q.try_admit(urgent, kNow);
    REQUIRE(decided.has_value());
    CHECK(decided->admitted());
    CHECK(q.pop(kNow, dropped) == &urgent);
    CHECK(q.pop(kNow, dropped) == &stopped);
    CHECK(dropped.empty());
  }
}

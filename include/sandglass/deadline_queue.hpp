// deadline_queue.hpp — `DeadlineQueue`, the bounded priority queue with deadline-aware
// admission, and `QueueItem`, what it holds.
//
//   sandglass::DeadlineQueue q{{.capacity = 1024, .workers = 8, .min_useful = 1ms}};
//   auto admission = q.admit(item, now);     // reason ok, or why not; maybe an item it shed
//   QueueItem* next = q.pop(now, dropped);   // highest class, earliest deadline; expired items
//                                            // land in `dropped` instead
//
// The queue is intrusive: it links items it does not own, allocates nothing per item and never
// walks all items. An item must stay alive, and in one queue at most, until it is popped,
// removed, dropped or shed. Submission and dequeue are O(log n).
//
// Admission, in this order: closed → shutting_down; less than `min_useful` left →
// budget_too_small; predicted completion after the deadline → deadline_implausible; admitting
// it would break a promise made to an item already queued (below) → deadline_implausible;
// full → shed the latest-deadline item of the lowest non-empty class below the newcomer's,
// else queue_full.
//
// The prediction is the order `pop` really serves. Work ahead of a newcomer = the `work` of
// every queued item of a higher class (parked ones included), plus that of the unparked items
// of its own class with an earlier or equal deadline; items it overtakes do not delay it. Predicted start = now + work ahead ÷
// workers + `Load::busy_for` (what the running jobs still need, per worker). For an
// item of a bulkhead group, also: now + the group's own work ahead (queued and parked, in the
// same order) ÷ the group's limit + `Load::group_busy_for`; the later of the two counts.
// Predicted finish = start + the newcomer's own `estimate` (a tail figure). Parked items of the
// newcomer's class delay only newcomers of their own group. An item without an estimate (its
// kind has no samples yet) is never rejected as implausible and counts no work.
//
// Promises kept: an admitted item has a latest useful start, deadline − estimate. A newcomer
// that overtakes items of its own class delays each of them by its work ÷ workers; it is
// rejected (deadline_implausible) if that would move the tightest of them from a predicted
// start at or before its latest start to one after it. Items already predicted late do not
// block newcomers (they are dropped at their latest start instead). Items of lower classes
// are not protected: a higher class may always overtake them, and those it pushes past their
// latest start are dropped as too_late_to_start.
//
// Each query is O(log n): the items of each class, of each parked set and of each group sit
// in treaps (randomised balanced trees) keyed by (class, deadline, arrival) whose nodes carry
// their subtree's sum of work, the smallest slack and the earliest drop time.
//
// The in-order run: jobs usually arrive in deadline order (one budget per class, or budgets
// that grow with time). An item of no group whose deadline is at or after every queued item of
// its class, and whose latest useful start is at or after that of the run's last item, is
// appended to its class's run, a linked list, instead of the tree: admitting it (it overtakes
// nobody, so the work ahead is the class's whole sum and no promise can break), linking it and
// popping it are O(1). A newcomer that would overtake part of the run first moves the run into
// the tree (each item at most once, O(log n) each), so the prediction stays the exact EDF
// order; `remove` and `expire` take an item out of the run in O(1).
//
// Latest useful start: with `drop_if_cannot_finish`, `expire` (the timer) and `pop` remove an
// item once less time is left than its estimate (too_late_to_start); `next_drop_time` says
// when the next one is due. Without it, only expired items are removed.
//
// Bulkheads: an item may belong to a group (non-zero `group`) whose concurrency the caller
// limits. `pop` asks `can_start(group)`; an item that may not start yet is parked, still
// counted, still expiring and still sheddable. Parked items never strand: whenever `pop` runs
// with a `can_start`, each group that may start and has no unparked item pending gets its most
// urgent parked item (highest class, earliest deadline) back in its class first, and again
// after an unparked item leaves without running. `unpark(group)` does the same on demand. An
// unparked item keeps its place by deadline (and arrival) in its class.
//
// Thread safety: none. Distinct objects: safe. Shared objects: unsafe; the runtime guards its
// queue with its own mutex.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/reason.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace sandglass {

struct QueueItem {
  Deadline deadline;
  Priority priority = Priority::normal;
  // The run time that must fit before the deadline (a tail estimate); zero: unknown.
  Duration estimate{};
  // The run time counted as work ahead of later items (a central estimate); zero: `estimate`.
  Duration work{};
  std::uint32_t group = 0;  // bulkhead group; zero: none

 private:
  friend class DeadlineQueue;
  friend struct QueueTree;
  // A treap node: children, heap priority and what the subtree sums up.
  struct Node {
    QueueItem* left = nullptr;
    QueueItem* right = nullptr;
    std::uint32_t heap = 0;
    std::int64_t sum = 0;        // work of the subtree, ns
    std::int64_t min_slack = 0;  // min over the subtree of scaled latest start − work before
    TimePoint min_drop{};        // earliest drop time in the subtree
  };
  enum class Place : std::uint8_t { none, queued, parked };
  Place place_ = Place::none;
  bool unparked_ = false;       // back in its class from parking, not yet gone
  bool in_run_ = false;         // in its class's in-order run (node_ links prev/next there)
  std::uint64_t seq_ = 0;       // arrival order, ties deadlines
  std::int64_t counted_ = 0;    // work as counted, ns
  std::int64_t scaled_latest_ = 0;  // (latest start − origin) × workers, ns
  TimePoint drop_at_{};         // when `expire` removes it
  Node node_;                   // in its class's tree or run, or its parked set's tree
  Node group_node_;             // in its group's tree
};

// An item that left the queue without being handed out, and why.
struct DroppedItem {
  QueueItem* item;
  Reason reason;  // expired_in_queue or too_late_to_start
};

struct DeadlineQueueOptions {
  std::size_t capacity = 1024;            // most items queued at once (parked ones included)
  std::size_t workers = 1;                // divides the work ahead in the prediction
  Duration min_useful = std::chrono::milliseconds{1};
  bool drop_if_cannot_finish = true;      // drop items with less left than their estimate
  // The concurrency limit of group g at [g − 1]; a group not listed is limited by `workers`.
  std::vector<std::size_t> group_limits{};
};

// What the caller knows about running work when an item is admitted: how long the running
// jobs still keep the workers busy, e.g. the sum of their (estimate − elapsed, not below zero)
// ÷ workers, and zero when a worker is idle.
struct Load {
  Duration busy_for{};
  Duration group_busy_for{};  // the same for the newcomer's group: its running jobs ÷ its limit
};

struct Admission {
  Reason reason = Reason::ok;  // ok, shutting_down, budget_too_small, deadline_implausible, queue_full
  QueueItem* shed = nullptr;   // an item removed to make room; its outcome: rejected, shed

  bool admitted() const noexcept { return reason == Reason::ok; }
};

class DeadlineQueue {
 public:
  explicit DeadlineQueue(DeadlineQueueOptions options);
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;
  ~DeadlineQueue();

  // Links `item` if it passes admission (see the file comment). O(log n).
  Admission admit(QueueItem& item, TimePoint now, Load load = {});

  // The predicted start of `item` if it were admitted at `now` (see the file comment); for
  // reporting and tests. O(log n).
  TimePoint predicted_start(const QueueItem& item, TimePoint now, Load load = {}) const;

  // The next item to start: highest class, earliest deadline. Items met on the way whose
  // deadline passed (or, with drop_if_cannot_finish, whose remaining time is below their
  // estimate) are unlinked and appended to `dropped`; items whose group may not start are
  // parked, and parked items of groups that may start are unparked first (see the file
  // comment). nullptr when nothing can start.
  QueueItem* pop(TimePoint now, std::vector<DroppedItem>& dropped,
                 const std::function<bool(std::uint32_t group)>& can_start = {});

  // Unlinks every item whose deadline passed at `now` (with drop_if_cannot_finish, also every
  // item with less time left than its estimate), parked ones included, into `dropped`.
  // O(log n) per item removed.
  void expire(TimePoint now, std::vector<DroppedItem>& dropped);

  // Returns the most urgent parked item of `group` to its class. True if there was one.
  bool unpark(std::uint32_t group);

  // Unlinks `item` if it is queued or parked. True if it was.
  bool remove(QueueItem& item) noexcept;

  // Stops admission: from now on `admit` answers shutting_down.
  void close() noexcept { closed_ = true; }
  bool closed() const noexcept { return closed_; }

  // Unlinks all items, highest class first.
  std::vector<QueueItem*> take_all();

  // The earliest deadline of any queued or parked item; never() when empty.
  Deadline earliest_deadline() const noexcept;
  // When `expire` next has something to remove: the earliest deadline or (with
  // drop_if_cannot_finish) latest useful start just passed; never() when empty.
  Deadline next_drop_time() const noexcept;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size(Priority priority) const noexcept;
  std::size_t capacity() const noexcept { return options_.capacity; }
  // Estimated work queued in `priority` and all classes above it, parked items included.
  Duration work_ahead(Priority priority) const noexcept;
  // Parked items of `group`.
  std::size_t parked(std::uint32_t group) const noexcept;

 private:
  struct Tree {
    QueueItem* root = nullptr;
    std::size_t size = 0;
  };
  // Items in key order, each latest start at or after the one before (see the file comment).
  struct Run {
    QueueItem* head = nullptr;
    QueueItem* tail = nullptr;
    std::size_t size = 0;
    std::int64_t sum = 0;  // their work, ns
  };
  struct Class {
    Tree items;
    QueueItem* items_max = nullptr;  // the last item of `items`
    Run run;
    std::vector<Tree> parked_by_group;  // indexed by group - 1
    std::int64_t work = 0;  // work of this class's items, parked ones included, ns
    std::size_t parked = 0;
  };
  struct Group {
    Tree all;                 // queued and parked, by (class, deadline, arrival)
    std::size_t parked = 0;
    std::size_t unparked = 0;  // unparked items still in their class
  };

  Class& class_of(const QueueItem& item) noexcept {
    return classes_[static_cast<std::size_t>(item.priority)];
  }
  Tree& parked_tree(Class& c, std::uint32_t group);
  Group& group_of(std::uint32_t group);
  std::size_t limit_of(std::uint32_t group) const noexcept;
  std::int64_t higher_work(Priority priority) const noexcept;
  std::int64_t scaled(TimePoint t) const noexcept;
  // Work of the class's queued (unparked) items before `key`.
  std::int64_t class_prefix(const Class& c, const QueueItem& key) const noexcept;
  void tree_insert(Class& c, QueueItem& item);
  void tree_erase(Class& c, QueueItem& item) noexcept;
  void run_push(Class& c, QueueItem& item) noexcept;
  void run_erase(Class& c, QueueItem& item) noexcept;
  void flush_run(Class& c);  // moves the run into the tree
  static QueueItem* class_front(Class& c) noexcept;
  void link(QueueItem& item);
  void unlink(QueueItem& item) noexcept;
  void park(QueueItem& item);
  bool unpark_one(std::uint32_t group);
  void refill(const std::function<bool(std::uint32_t)>& can_start);
  QueueItem* front() noexcept;
  QueueItem* shed_for(Priority newcomer) noexcept;
  std::uint32_t next_heap() noexcept;

  DeadlineQueueOptions options_;
  std::array<Class, kPriorityCount> classes_;
  std::vector<Group> groups_;  // indexed by group - 1
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t rng_ = 0x9E3779B97F4A7C15ull;
  TimePoint origin_{};  // latest starts are kept relative to it
  bool has_origin_ = false;
  bool closed_ = false;
};

}  // namespace sandglass

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
// Admission, in this order: closed → shutting_down; less than `min_useful` left → budget_too_small;
// predicted completion after the deadline → deadline_implausible; admitting it would break a
// promise made to an item already queued (below) → deadline_implausible; full → shed the
// latest-deadline item of the lowest non-empty class below the newcomer's, else queue_full.
//
// The prediction is the order `pop` really serves. Work ahead of a newcomer = the `work` of every
// queued item of a higher class (parked ones included), plus that of the unparked items of its own
// class with an earlier or equal deadline; items it overtakes do not delay it. Predicted start =
// now + work ahead ÷ workers + `Load::busy_for` (what the running jobs still need, per worker). For
// an item of a bulkhead group, also: now + the group's own work ahead (queued and parked, in the
// same order) ÷ the group's limit + `Load::group_busy_for`; the later of the two counts. Predicted
// finish = start + the newcomer's own `estimate` (a tail figure). With a limit on the predicted
// start (Load::start_within, an owner's standing-queue rule), a newcomer predicted to start later
// than that is refused as queue_full after the deadline test, whether or not it has an estimate: an
// urgent newcomer that overtakes the queued work still starts early. Parked items of the newcomer's
// class delay only newcomers of their own group. An item without an estimate (its kind has no
// samples yet) is never rejected as implausible and counts no work.
//
// Promises kept: an admitted item has a latest useful start, deadline − estimate. A newcomer that
// overtakes items of its own class delays each of them by its work ÷ workers; it is rejected
// (deadline_implausible) if that would move the tightest of them from a predicted start at or
// before its latest start to one after it. Items already predicted late do not block newcomers
// (they are dropped at their latest start instead). Items of lower classes are not protected: a
// higher class may always overtake them, and those it pushes past their latest start are dropped as
// too_late_to_start.
//
// Each query is O(log n): the items of each class, of each parked set and of each group sit in
// treaps (randomised balanced trees) keyed by (class, deadline, arrival) whose nodes carry their
// subtree's sum of work, the smallest slack and the earliest drop time.
//
// The in-order run: jobs usually arrive in deadline order (one budget per class, or budgets that
// grow with time). An item of no group whose deadline is at or after every queued item of its class
// is appended to its class's run, a linked list, instead of the tree. The run is cut into up to
// kRunSegments segments: within one, a latest useful start is at most kRunDisorder (50 µs) before
// that of any item ahead of it (a tail estimate that moved between two submits); an item further
// before the last segment's (a tail estimate that jumped by milliseconds) begins a new segment, or
// with all in use goes to the tree. `expire` and `next_drop_time` look at each segment's items
// within its disorder of its first: admitting it (it overtakes nobody, so the work ahead is the
// class's whole sum and no promise can break), linking it and popping it are O(1). A newcomer that
// overtakes at most kRunWalkBack (8) items at the run's end (all of its last segment), and none in
// the tree, joins the run among them if the drop times stay that near order (concurrent submitters
// reorder a few jobs): its work ahead and the promises of the items it overtakes are read by
// walking those few, O(8). Any other newcomer that would overtake part of the run first moves that
// part, the run's tail, into the tree (each item at most once, O(log n) each), so the prediction
// stays the exact EDF order; `remove` and `expire` take an item out of the run in O(1). The rest of
// the run stays a run: every item it holds is before the newcomer, and so before every tree item
// the newcomer overtakes.
//
// Latest useful start: with `drop_if_cannot_finish`, `expire` (the timer) and `pop` remove an item
// once less time is left than its estimate (too_late_to_start); `next_drop_time` says when the next
// one is due. Without it, only expired items are removed.
//
// Bulkheads: an item may belong to a group (non-zero `group`) whose concurrency the caller limits.
// `pop` asks `can_start(group)`; an item that may not start yet is parked, still counted, still
// expiring and still sheddable. Parked items never strand: whenever `pop` runs with a `can_start`,
// each group that may start and has no unparked item pending gets its most urgent parked item
// (highest class, earliest deadline) back in its class first, and again after an unparked item
// leaves without running. `unpark(group)` does the same on demand. An unparked item keeps its place
// by deadline (and arrival) in its class.
//
// The inbox (lock-free admission): `admit_lock_free` may run on any thread while the owner holds
// its lock for everything else. It takes only the easy, common case: an item of no group, with at
// least `min_useful` left, whose deadline is at or after that of every item of its class admitted
// so far (so it overtakes nobody and no promise can break), that fits a predicted start computed
// from an upper bound (all work queued in its class and above, reservations in flight included, ÷
// workers + a bound of the running jobs' rest), while there is room. It reserves the place and the
// work with atomic adds, claims its class's order with one compare-and-swap on the class's latest
// deadline (the point where it is admitted), and pushes the item onto an intrusive list with one
// more. Anything else (a rejection, shedding, an item that would overtake queued work, a bulkhead
// item) returns false and is decided by `admit` under the lock, exactly. The owner links the inbox
// into the structure above (`splice`, which `pop`, `take`, `expire`, `remove`, `take_all` and
// `admit` do first); `admit` and `take_all` first wait until every reservation made before them is
// linked (`try_admit` and `try_take_all` decline instead of waiting, for an owner that holds a
// lock), so the locked decision sees every item admitted before it, and an item admitted lock-free
// after it sees its work. An upper bound admits only what the exact rule admits, so both paths
// decide as one EDF queue; the model test in tests/queue checks it.
//
// Thread safety: `admit_lock_free`, `inbox_empty`, `size()`, `empty()` and `closed()` may be called
// concurrently with anything. Everything else: distinct objects: safe; shared objects: unsafe; the
// runtime guards its queue with its own mutex.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/reason.hpp>
#include <sandglass/detail/deadline_queue_parts.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace sandglass {

struct QueueItem {
  Deadline deadline;
  // The run time that must fit before the deadline (a tail estimate); zero: unknown.
  Duration estimate{};
  // The run time counted as work ahead of later items (a central estimate); zero: `estimate`.
  Duration work{};
  std::uint32_t group = 0;  // bulkhead group; zero: none
  Priority priority = Priority::normal;  // beside `group` and the flags below: no padding

  // When admission predicted it to start, to the microsecond, as of its admission; the clock's
  // epoch when it made no prediction (an item without an estimate while no start limit holds).
  TimePoint predicted_start() const noexcept {
    if (node_.predicted_slack_us == kNoPrediction) return TimePoint{};
    return saturating_add(deadline.time_point(), -std::chrono::microseconds{node_.predicted_slack_us});
  }

 private:
  friend class DeadlineQueue;
  friend struct QueueTree;
  using Node = detail::QueueNode;
  enum class Place : std::uint8_t { none, inbox, queued, parked };
  Place place_ = Place::none;
  bool unparked_ = false;       // back in its class from parking, not yet gone
  bool in_run_ = false;         // in its class's in-order run (node_ links prev/next there)
  std::uint64_t seq_ = 0;       // arrival order, ties deadlines
  std::int64_t counted_ = 0;    // work as counted, ns
  std::int64_t scaled_latest_ = 0;  // (latest start − origin) × workers, ns
  TimePoint drop_at_{};         // when `expire` removes it
  // In its class's tree or run, or its parked set's tree. In the inbox the item is in none of
  // them: node_.left then links the item pushed before it (inbox_next()).
  Node node_;
  // In its group's tree: made by the queue when an item of a group is first linked, and kept
  // for the item's next admission. Only bulkhead items pay for it (an item of no group carries
  // one null pointer instead of a node: one cache line fewer per item).
  std::unique_ptr<Node> group_node_;
  QueueItem*& inbox_next() noexcept { return node_.left; }
  static constexpr std::int32_t kNoPrediction = detail::kNoPredictedSlack;
  // Sets predicted_start(); the epoch: none.
  void note_predicted_start(TimePoint start) noexcept {
    if (start == TimePoint{}) {
      node_.predicted_slack_us = kNoPrediction;
      return;
    }
    const auto slack = std::chrono::duration_cast<std::chrono::microseconds>(saturating_sub(deadline.time_point(), start));
    node_.predicted_slack_us = static_cast<std::int32_t>(
        std::clamp<std::int64_t>(slack.count(), kNoPrediction + 1, std::numeric_limits<std::int32_t>::max()));
  }
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
  // The latest predicted start admitted, from now: a newcomer predicted to start later is
  // refused (queue_full, Admission::beyond_target) even if it would finish in time. An owner
  // that detects a standing queue sets it to its target delay; max(): no limit.
  Duration start_within = Duration::max();
  // Added to the predicted finish when deciding whether it is in time (an owner's measure of
  // its predictions' error), not to the predicted start (QueueItem::predicted_start).
  Duration margin{};
};

struct Admission {
  Reason reason = Reason::ok;  // ok, shutting_down, budget_too_small, deadline_implausible, queue_full
  QueueItem* shed = nullptr;   // an item removed to make room; its outcome: rejected, shed
  // For queue_full: refused because its predicted start is beyond Load::start_within (the
  // queue holds enough to keep the workers busy), not for want of room.
  bool beyond_target = false;
  // For deadline_implausible: the item's predicted start (see `predicted_start`), which the
  // decision compared; unset otherwise.
  TimePoint predicted_start{};

  bool admitted() const noexcept { return reason == Reason::ok; }
};

class DeadlineQueue {
 public:
  explicit DeadlineQueue(DeadlineQueueOptions options);
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;
  ~DeadlineQueue();

  // Links `item` if it passes admission (see the file comment). O(log n), after waiting for
  // lock-free admissions in flight (a few instructions each) to reach the inbox. Blocks while
  // a submitter is stopped between its reservation and its push: an owner that guards the
  // queue with a lock calls try_admit instead.
  Admission admit(QueueItem& item, TimePoint now, Load load = {});
  // As `admit`, without waiting: when lock-free admissions are still on their way to the
  // inbox after a brief spin (a submitter preempted between its reservation and its push),
  // decides nothing, gives back what it reserved and returns nullopt. The caller lets its
  // lock go (so that its workers and timer are not held up by that submitter) and calls
  // again. Items it linked from the inbox stay linked.
  std::optional<Admission> try_admit(QueueItem& item, TimePoint now, Load load = {});

  // An upper bound of Load::busy_for at `now`, readable without the owner's lock: called by
  // admit_lock_free after it has read the queued work (see `take`). Must not block.
  struct BusyBound {
    Duration (*bound)(const void* context, TimePoint now) noexcept = nullptr;
    const void* context = nullptr;
  };
  // Admits `item` into the inbox without the owner's lock if it is the easy case (see "The
  // inbox" in the file comment); false changes nothing: call `admit` under the lock. Any
  // thread. On true the item belongs to the queue as if `admit` had linked it.
  // `start_within`, `margin`: as Load's (an item predicted to start later is declined).
  bool admit_lock_free(QueueItem& item, TimePoint now, BusyBound busy,
                       Duration start_within = Duration::max(), Duration margin = {}) noexcept;
  // admit_lock_free in two halves, for a caller that must prepare the item in between (a
  // runtime sets the reference a consumer takes, which a declined item should not pay for):
  // `lock_free_may_admit` runs admit_lock_free's tests with plain loads and changes nothing
  // but the item's own counted work (false: admit_lock_free would decline); after a true,
  // `claim_lock_free` reserves, claims and pushes as admit_lock_free does (false changes
  // nothing). Together they decide as admit_lock_free.
  bool lock_free_may_admit(QueueItem& item, TimePoint now, BusyBound busy,
                           Duration start_within = Duration::max(), Duration margin = {}) noexcept;
  bool claim_lock_free(QueueItem& item, TimePoint now, BusyBound busy,
                       Duration start_within = Duration::max(), Duration margin = {}) noexcept;
  // How far `deadline` is before the latest deadline admitted to class `priority` (zero: not
  // before it): the lock-free path declines an item that is behind (it would overtake queued
  // work). Concurrent submitters of equal budgets are behind by a little when one read the
  // clock earlier but claimed later; a caller whose deadline is "now + budget" may read the
  // clock again and retry with the later deadline. Any thread.
  Duration behind_class_order(Priority priority, Deadline deadline) const noexcept;
  // Links the items admit_lock_free pushed, in arrival order. O(log n) each, O(1) for items
  // that extend their class's in-order run.
  void splice();
  // Items splice() linked so far (whoever called it): an owner that lets a thread other than
  // its consumers splice (a timer) compares this before and after, and wakes a consumer that
  // may have gone to sleep in between (it saw the inbox empty because of that splice).
  std::uint64_t spliced_total() const noexcept { return spliced_total_; }
  bool inbox_empty() const noexcept { return inbox_.load(std::memory_order_seq_cst) == nullptr; }
  // Asks the processor to fetch the newest inbox item's fields that splice() writes (they were
  // written last by its submitter, on another core), for an owner about to wait for its lock
  // and then splice. A hint: any thread, changes nothing; the item may be gone by then
  // (a prefetch never faults).
  void prefetch_inbox() const noexcept;

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
  // As `pop`, but the item's reservation (its place and its work, which admit_lock_free reads
  // as work ahead) stays held until `release(item)`: a caller that counts the item as running
  // work elsewhere releases it after that is visible, so a lock-free admission in between
  // sees the item in one of the two places. `release`, like everything but the calls listed
  // under "Thread safety", runs under the owner's exclusion: it is two plain stores, no
  // read-modify-write (see released_).
  QueueItem* take(TimePoint now, std::vector<DroppedItem>& dropped,
                  const std::function<bool(std::uint32_t group)>& can_start = {});
  void release(QueueItem& item) noexcept;

  // Unlinks every item whose deadline passed at `now` (with drop_if_cannot_finish, also every
  // item with less time left than its estimate), parked ones included, into `dropped`.
  // O(log n) per item removed.
  void expire(TimePoint now, std::vector<DroppedItem>& dropped);

  // Returns the most urgent parked item of `group` to its class. True if there was one.
  bool unpark(std::uint32_t group);

  // Unlinks `item` if it is queued or parked. True if it was.
  bool remove(QueueItem& item) noexcept;

  // Stops admission: from now on `admit` answers shutting_down and admit_lock_free declines.
  // Pairs with the seq_cst load in admit_lock_free, after its reservation: either that sees
  // the queue closed, or `take_all` waits for its item.
  void close() noexcept { closed_.store(true, std::memory_order_seq_cst); }
  bool closed() const noexcept { return closed_.load(std::memory_order_seq_cst); }

  // Unlinks all items, highest class first, the inbox's and those in flight included. Blocks
  // as `admit` does; try_take_all does not wait (nullopt: admissions still in flight; nothing
  // taken, call again, see try_admit).
  std::vector<QueueItem*> take_all();
  std::optional<std::vector<QueueItem*>> try_take_all();

  // The earliest deadline of any queued or parked item; never() when empty.
  Deadline earliest_deadline() const noexcept;
  // When `expire` next has something to remove: the earliest deadline or (with
  // drop_if_cannot_finish) latest useful start just passed; never() when empty.
  Deadline next_drop_time() const noexcept;

  // Items queued, parked or in the inbox (and, for a moment, lock-free reservations in flight
  // and taken items not yet released).
  std::size_t size() const noexcept {
    // Released first. Acquire, pairing with the release store in release(): each release it
    // sees comes after its item's reservation, which the load of reserved_ then sees too, so
    // the difference never goes below zero.
    const std::size_t released = released_.load(std::memory_order_acquire);
    return reserved_.load(std::memory_order_relaxed) - released;
  }
  bool empty() const noexcept { return size() == 0; }
  // The linked items (queued and parked; not the inbox, nor reservations in flight or taken
  // items not yet released). The owner's count: reading it takes no cache line from
  // submitters, as size() does (it reads the reservations they write).
  std::size_t linked_size() const noexcept { return size_; }
  // The linked items of one class (call `splice` first to count the inbox).
  std::size_t size(Priority priority) const noexcept;
  std::size_t capacity() const noexcept { return options_.capacity; }
  // Estimated work queued in `priority` and all classes above it, parked items included.
  Duration work_ahead(Priority priority) const noexcept;
  // Parked items of `group`.
  std::size_t parked(std::uint32_t group) const noexcept;

 private:
  // The containers' internals (detail/deadline_queue_parts.hpp).
  using Tree = detail::TreeRoot;
  using RunSegment = detail::RunSegment;
  using Run = detail::Run;
  using RunPlace = detail::RunPlace;
  using Class = detail::QueueClass;
  using Group = detail::QueueGroup;
  static constexpr std::size_t kRunSegments = detail::kRunSegments;
  // Where segment `s` of `run` ends: the next segment's first, or the run's end (nullptr).
  static const QueueItem* segment_end(const Run& run, std::size_t s) noexcept {
    return s + 1 < run.segment_count ? run.segments[s + 1].first : nullptr;
  }

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
  static constexpr std::size_t kRunWalkBack = 8;
  // The most a run item's drop time may be before one ahead of it in its segment (an
  // estimate that moved between two submits); more, and an appended newcomer starts a new
  // segment (one that overtakes items goes to the tree).
  static constexpr Duration kRunDisorder = std::chrono::microseconds{50};
  // When `expire` removes `item` (once its estimate is known).
  TimePoint drop_time(const QueueItem& item) const noexcept {
    return options_.drop_if_cannot_finish
               ? saturating_add(item.deadline.time_point(), -item.estimate)
               : item.deadline.time_point();
  }
  // Where `item` (drop time `drop_at`, ordered as `key`) may join its class's run: true with
  // `place` set, when it is of no group, no tree item comes after it, at most kRunWalkBack
  // items of the run's last segment do (and none of an earlier one), and the drop times stay
  // within kRunDisorder of order in that segment, or it comes last and a new segment is free.
  static bool run_place(const Class& c, const QueueItem& item, const QueueItem& key,
                        TimePoint drop_at, RunPlace& place) noexcept;
  // Links `item` into the run where run_place said.
  void run_insert(Class& c, QueueItem& item, const RunPlace& place) noexcept;
  void run_erase(Class& c, QueueItem& item) noexcept;
  void flush_run(Class& c);  // moves the run into the tree
  static QueueItem* class_front(Class& c) noexcept;
  void link(QueueItem& item);
  // Unlinks; with `release`, also gives back its reservation (see `take`).
  void unlink(QueueItem& item, bool release = true) noexcept;
  // Reserves what admit_lock_free reads (a place, the work) and claims the class's order for
  // a deadline; `reserve` undoes nothing. `unreserve` takes back a reservation not linked, on
  // the reserving side (any thread: a lock-free admission that lost); the owner gives one back
  // with `release` instead.
  void reserve(const QueueItem& item) noexcept;
  void unreserve(const QueueItem& item) noexcept;
  void claim_order(Priority priority, TimePoint deadline) noexcept;
  // Splices until every reservation but `own` is linked (lock-free admissions in flight
  // finish in a few instructions); false if some are still in flight after kSettleSpins
  // rounds. Never waits longer.
  bool try_settle(std::size_t own);
  static constexpr unsigned kSettleSpins = 64;
  // Whether the upper bound of `item`'s predicted finish (see "The inbox") is within its
  // deadline, and that of its start within `start_within` of now; `own`: its own reserved
  // work, which the bound leaves out; `margin`: Load::margin. `start`: the bound of its start
  // (the epoch: none made).
  bool fits(const QueueItem& item, std::size_t cls, TimePoint now, BusyBound busy,
            std::int64_t own, Duration start_within, Duration margin, TimePoint& start) const noexcept;
  // admit's rules, once the inbox is settled.
  Admission decide(QueueItem& item, TimePoint now, Load load);
  void park(QueueItem& item);
  bool unpark_one(std::uint32_t group);
  void refill(const std::function<bool(std::uint32_t)>& can_start);
  QueueItem* front() noexcept;
  QueueItem* shed_for(Priority newcomer) noexcept;
  std::uint32_t next_heap() noexcept;

  DeadlineQueueOptions options_;
  std::array<Class, kPriorityCount> classes_;
  std::vector<Group> groups_;  // indexed by group - 1
  std::size_t size_ = 0;  // linked items
  std::uint64_t spliced_total_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t rng_ = 0x9E3779B97F4A7C15ull;
  TimePoint origin_{};  // latest starts are kept relative to it
  bool has_origin_ = false;

  // What admit_lock_free reads and writes (the owner's lock does not guard them). Reservations:
  // every item admitted (either path) and not yet released holds one place and its work. They
  // are counted as two running sums, what was reserved less what was released, each on a line
  // of its own: submitters add to reserved_ (read-modify-writes, as several add at once) and
  // take back only a reservation of their own that failed (unreserve); only the owner, under
  // its exclusion, adds to released_, so a release is a plain load and store (release order)
  // instead of two locked read-modify-writes on the line every submitter writes. Work sums are
  // ns and wrap (unsigned); differences are what counts.
  std::atomic<bool> closed_{false};
  alignas(64) std::atomic<std::size_t> reserved_{0};
  std::array<std::atomic<std::uint64_t>, kPriorityCount> reserved_work_{};  // ns, by class
  alignas(64) std::atomic<std::size_t> released_{0};
  std::array<std::atomic<std::uint64_t>, kPriorityCount> released_work_{};  // ns, by class
  // Per class: above every deadline admitted in the class, strictly increasing (ns since the
  // clock's epoch). A lock-free admission claims its place in the class's order by raising it
  // with a compare-and-swap; `admit` raises it too, which fails the claims in flight.
  alignas(64) std::array<std::atomic<std::int64_t>, kPriorityCount> order_{};
  // The inbox: the item pushed last, linked to those before (inbox_next()).
  alignas(64) std::atomic<QueueItem*> inbox_{nullptr};
};

}  // namespace sandglass

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
// budget_too_small; predicted completion after the deadline → deadline_implausible; full →
// shed the latest-deadline item of the lowest non-empty class below the newcomer's, else
// queue_full. The prediction is now + (estimated work queued in the newcomer's class and above
// ÷ workers) + the newcomer's estimate. Items of the newcomer's own class with later deadlines
// are counted too, so the prediction errs on the late side. An item without an estimate (its
// kind has no samples yet) is never rejected as implausible.
//
// Bulkheads: an item may belong to a group (non-zero `group`) whose concurrency the caller
// limits. `pop` asks `can_start(group)`; an item that may not start yet is parked, still
// counted, still expiring and still sheddable, until `unpark(group)` returns the group's most
// urgent parked item (highest class, earliest deadline) to its class. An unparked item goes
// behind items of its class with the same deadline.
//
// Thread safety: none. Distinct objects: safe. Shared objects: unsafe; the runtime guards its
// queue with its own mutex.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/reason.hpp>

#include <boost/intrusive/set.hpp>

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
  Duration estimate{};     // the kind's service-time estimate when admitted; zero: unknown
  std::uint32_t group = 0; // bulkhead group; zero: none

 private:
  friend class DeadlineQueue;
  enum class Place : std::uint8_t { none, queued, parked };
  Place place_ = Place::none;
  boost::intrusive::set_member_hook<> hook_;
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
  bool drop_if_cannot_finish = true;      // pop drops items with less left than their estimate
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
  Admission admit(QueueItem& item, TimePoint now);

  // The next item to start: highest class, earliest deadline. Items met on the way whose
  // deadline passed (or, with drop_if_cannot_finish, whose remaining time is below their
  // estimate) are unlinked and appended to `dropped`; items whose group may not start are
  // parked. nullptr when nothing can start.
  QueueItem* pop(TimePoint now, std::vector<DroppedItem>& dropped,
                 const std::function<bool(std::uint32_t group)>& can_start = {});

  // Unlinks every item whose deadline passed at `now`, parked ones included, into `dropped`.
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

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size(Priority priority) const noexcept;
  std::size_t capacity() const noexcept { return options_.capacity; }
  // Estimated work queued in `priority` and all classes above it.
  Duration work_ahead(Priority priority) const noexcept;

 private:
  struct ByDeadline {
    bool operator()(const QueueItem& a, const QueueItem& b) const noexcept {
      return a.deadline < b.deadline;
    }
  };
  using Set = boost::intrusive::multiset<
      QueueItem,
      boost::intrusive::member_hook<QueueItem, boost::intrusive::set_member_hook<>,
                                    &QueueItem::hook_>,
      boost::intrusive::compare<ByDeadline>>;
  struct Class {
    Set items;
    std::vector<Set> parked_by_group;  // indexed by group - 1
    Duration work{};  // sum of estimates of this class's items, parked ones included
    std::size_t parked = 0;
  };

  Class& class_of(const QueueItem& item) noexcept {
    return classes_[static_cast<std::size_t>(item.priority)];
  }
  static Set& parked_set(Class& c, std::uint32_t group);
  void link(QueueItem& item);
  void unlink(QueueItem& item) noexcept;
  QueueItem* shed_for(Priority newcomer) noexcept;

  DeadlineQueueOptions options_;
  std::array<Class, kPriorityCount> classes_;
  std::size_t size_ = 0;
  bool closed_ = false;
};

}  // namespace sandglass

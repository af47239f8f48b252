// The lock-free half of DeadlineQueue's admission: admit_lock_free, the inbox and the
// reservations both paths share (see "The inbox" in deadline_queue.hpp).
#include <sandglass/deadline_queue.hpp>

#include "queue/saturating_ns.hpp"

#include <algorithm>
#include <limits>

namespace sandglass {
namespace {

using detail::add_sat;
using detail::kInf;

std::int64_t ns_since_epoch(TimePoint t) noexcept {
  return std::chrono::nanoseconds{t.time_since_epoch()}.count();
}

std::size_t index_of(Priority p) noexcept { return static_cast<std::size_t>(p); }

// The class's order after an item with `deadline` took its place: strictly above what it was
// (so a claim that read the old value fails) and above the deadline (so an equal deadline
// that comes later goes the locked way, where arrival order ties).
std::int64_t raised(std::int64_t order, std::int64_t deadline) noexcept {
  return std::max(add_sat(order, 1), add_sat(deadline, 1));
}

void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

bool DeadlineQueue::admit_lock_free(QueueItem& item, TimePoint now, BusyBound busy,
                                    Duration start_within, Duration margin) noexcept {
  return lock_free_may_admit(item, now, busy, start_within, margin) &&
         claim_lock_free(item, now, busy, start_within, margin);
}

bool DeadlineQueue::lock_free_may_admit(QueueItem& item, TimePoint now, BusyBound busy,
                                        Duration start_within, Duration margin) noexcept {
  if (item.group != 0) return false;
  item.estimate = std::max(item.estimate, Duration::zero());
  item.work = std::max(item.work, Duration::zero());
  const Duration left = item.deadline.remaining(now);
  if (left < options_.min_useful || left == Duration::zero()) return false;  // admit rejects it
  item.counted_ = std::chrono::nanoseconds{item.work > Duration::zero() ? item.work : item.estimate}.count();
  const std::size_t cls = index_of(item.priority);
  // The tests of claim_lock_free with plain loads: an item that will be declined (most
  // rejections) then costs no read-modify-write, and a rejection stays cheap.
  TimePoint start{};
  return !closed_.load(std::memory_order_relaxed) && size() < options_.capacity &&
         ns_since_epoch(item.deadline.time_point()) >= order_[cls].load(std::memory_order_relaxed) &&
         fits(item, cls, now, busy, 0, start_within, margin, start);
}

bool DeadlineQueue::claim_lock_free(QueueItem& item, TimePoint now, BusyBound busy,
                                    Duration start_within, Duration margin) noexcept {
  const std::size_t cls = index_of(item.priority);
  const std::int64_t deadline = ns_since_epoch(item.deadline.time_point());
  // Releases read before the reservation (acquire: pairs with the release store in release()):
  // each one seen is of an item reserved before this one, so `before - released` counts no
  // release twice and never less than the places taken when it reserved (an upper bound; a
  // release read after the reservation could be of an item reserved after it).
  const std::size_t released = released_.load(std::memory_order_acquire);
  // The place and the work first: whoever looks after this sees them (an upper bound).
  const std::size_t before = reserved_.fetch_add(1, std::memory_order_seq_cst);
  if (before - released >= options_.capacity) {
    reserved_.fetch_sub(1, std::memory_order_relaxed);
    return false;  // full: admit sheds or refuses
  }
  if (item.counted_ > 0) {
    reserved_work_[cls].fetch_add(static_cast<std::uint64_t>(item.counted_), std::memory_order_seq_cst);
  }
  // After the reservation: close() pairs with it (see there).
  if (!closed_.load(std::memory_order_seq_cst)) {
    std::int64_t order = order_[cls].load(std::memory_order_seq_cst);
    TimePoint start{};
    for (int attempt = 0; attempt < 4 && deadline >= order; ++attempt) {
      if (!fits(item, cls, now, busy, item.counted_, start_within, margin, start)) break;  // not sure
      // The point of admission: no item of its class came in since `order` was read, so the
      // work read above holds every one admitted before it (each reserved before it claimed).
      if (order_[cls].compare_exchange_weak(order, raised(order, deadline), std::memory_order_seq_cst,
                                            std::memory_order_seq_cst)) {
        item.place_ = QueueItem::Place::inbox;
        item.note_predicted_start(start);
        // Release: the item's fields travel with it to splice()'s acquire.
        QueueItem* head = inbox_.load(std::memory_order_relaxed);
        do {
          item.inbox_next() = head;
        } while (!inbox_.compare_exchange_weak(head, &item, std::memory_order_seq_cst,
                                               std::memory_order_relaxed));
        return true;
      }
    }
  }
  unreserve(item);
  return false;
}

Duration DeadlineQueue::behind_class_order(Priority priority, Deadline deadline) const noexcept {
  // Seq_cst: read after the caller's failed claim, so a retry reads the clock after the
  // claim that raised the order (whose deadline came from an earlier clock reading). The
  // order is one above the latest deadline (see raised()).
  const std::int64_t latest = add_sat(order_[index_of(priority)].load(std::memory_order_seq_cst), -1);
  const std::int64_t d = ns_since_epoch(deadline.time_point());
  return std::chrono::nanoseconds{d < latest ? add_sat(latest, -d) : 0};
}

bool DeadlineQueue::fits(const QueueItem& item, std::size_t cls, TimePoint now, BusyBound busy,
                         std::int64_t own, Duration start_within, Duration margin,
                         TimePoint& start) const noexcept {
  start = TimePoint{};
  const bool limited = start_within != Duration::max();
  if (item.estimate <= Duration::zero() && !limited) return true;  // unknown: admit
  // Work ahead: the classes up to this one, reservations in flight included, less its own
  // (if reserved); then what the running jobs still need, read after the work (see `take`).
  // Per class, the work released is read before the work reserved (acquire, pairing with the
  // release store in release()): every release it sees is of work the later read of the
  // reserved sum includes, so the difference bounds the work reserved and not released at the
  // second read from above. A negative difference can only be a wrapped sum: no bound.
  std::array<std::uint64_t, kPriorityCount> released{};
  for (std::size_t p = 0; p <= cls; ++p) released[p] = released_work_[p].load(std::memory_order_acquire);
  std::int64_t ahead = -own;
  for (std::size_t p = 0; p <= cls; ++p) {
    const auto in_class =
        static_cast<std::int64_t>(reserved_work_[p].load(std::memory_order_seq_cst) - released[p]);
    ahead = add_sat(ahead, in_class >= 0 ? in_class : kInf);
  }
  ahead = std::max<std::int64_t>(ahead, 0);
  const Duration busy_for = std::max(busy.bound(busy.context, now), Duration::zero());
  start = saturating_add(
      saturating_add(now, std::chrono::nanoseconds{ahead / static_cast<std::int64_t>(options_.workers)}),
      busy_for);
  if (limited && start > saturating_add(now, start_within)) return false;
  return item.estimate <= Duration::zero() ||
         saturating_add(saturating_add(start, item.estimate), std::max(margin, Duration::zero())) <=
             item.deadline.time_point();
}

void DeadlineQueue::prefetch_inbox() const noexcept {
  const QueueItem* newest = inbox_.load(std::memory_order_relaxed);
  if (newest == nullptr) return;
  const char* bytes = reinterpret_cast<const char*>(newest);
  for (std::size_t at = 0; at < sizeof(QueueItem); at += 64) __builtin_prefetch(bytes + at, 1);
}

void DeadlineQueue::splice() {
  // Pairs with the push in admit_lock_free; seq_cst, as a worker's look at the inbox before
  // it sleeps is (see the runtime's IdleWorkers).
  QueueItem* lifo = inbox_.exchange(nullptr, std::memory_order_seq_cst);
  QueueItem* fifo = nullptr;
  while (lifo != nullptr) {
    QueueItem* next = lifo->inbox_next();
    lifo->inbox_next() = fifo;
    fifo = lifo;
    lifo = next;
  }
  while (fifo != nullptr) {
    QueueItem& item = *fifo;
    fifo = item.inbox_next();
    item.inbox_next() = nullptr;
    if (!has_origin_) {
      origin_ = item.deadline.time_point();
      has_origin_ = true;
    }
    link(item);  // reserved already
    ++spliced_total_;
  }
}

void DeadlineQueue::reserve(const QueueItem& item) noexcept {
  reserved_.fetch_add(1, std::memory_order_seq_cst);
  if (item.counted_ > 0) {
    reserved_work_[index_of(item.priority)].fetch_add(static_cast<std::uint64_t>(item.counted_),
                                                      std::memory_order_seq_cst);
  }
}

void DeadlineQueue::unreserve(const QueueItem& item) noexcept {
  // Seq_cst: pairs with the seq_cst reads of admit_lock_free and try_settle.
  if (item.counted_ > 0) {
    reserved_work_[index_of(item.priority)].fetch_sub(static_cast<std::uint64_t>(item.counted_),
                                                      std::memory_order_seq_cst);
  }
  reserved_.fetch_sub(1, std::memory_order_seq_cst);
}

void DeadlineQueue::release(QueueItem& item) noexcept {
  // Only the owner writes released_ (under its exclusion), so a load and a store add to it: no
  // read-modify-write, no full fence. Release order: pairs with the acquire loads of
  // admit_lock_free (claim_lock_free, fits) and size(); whoever sees a release sees what the
  // owner did before it (the runtime's slot end, see RuntimeCore::mark_running) and, through the
  // splice that linked the item, the item's reservation. The work first, the place last.
  if (item.counted_ > 0) {
    std::atomic<std::uint64_t>& work = released_work_[index_of(item.priority)];
    work.store(work.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(item.counted_),
               std::memory_order_release);
  }
  released_.store(released_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void DeadlineQueue::claim_order(Priority priority, TimePoint deadline) noexcept {
  std::atomic<std::int64_t>& order = order_[index_of(priority)];
  const std::int64_t d = ns_since_epoch(deadline);
  std::int64_t seen = order.load(std::memory_order_seq_cst);
  // Pairs with the compare-and-swap of admit_lock_free: a claim that read `seen` fails.
  while (!order.compare_exchange_weak(seen, raised(seen, d), std::memory_order_seq_cst,
                                      std::memory_order_seq_cst)) {
  }
}

bool DeadlineQueue::try_settle(std::size_t own) {
  // Every reservation is linked, or given back, a few instructions after it was made: a
  // brief spin covers that. A submitter preempted in between is not waited for here, where
  // the owner may hold a lock its workers and timer need.
  for (unsigned spins = 0;; ++spins) {
    splice();
    // released_ is the owner's own (see there): relaxed.
    if (reserved_.load(std::memory_order_seq_cst) - released_.load(std::memory_order_relaxed) ==
        size_ + own) {
      return true;
    }
    if (spins == kSettleSpins) return false;
    pause();
  }
}

}  // namespace sandglass

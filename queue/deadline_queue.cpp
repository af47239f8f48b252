#include <sandglass/deadline_queue.hpp>

#include <algorithm>
#include <cassert>

namespace sandglass {

DeadlineQueue::DeadlineQueue(DeadlineQueueOptions options) : options_{options} {
  options_.workers = std::max<std::size_t>(options_.workers, 1);
}

DeadlineQueue::~DeadlineQueue() {
  // Unlinks what is left (safe-mode hooks assert when destroyed linked) and marks it unqueued.
  auto forget = [](QueueItem* item) { item->place_ = QueueItem::Place::none; };
  for (Class& c : classes_) {
    c.items.clear_and_dispose(forget);
    for (Set& parked : c.parked_by_group) parked.clear_and_dispose(forget);
  }
}

Admission DeadlineQueue::admit(QueueItem& item, TimePoint now) {
  assert(item.place_ == QueueItem::Place::none);
  if (closed_) return {Reason::shutting_down};
  item.estimate = std::max(item.estimate, Duration::zero());
  const Duration left = item.deadline.remaining(now);
  if (left < options_.min_useful || left == Duration::zero()) return {Reason::budget_too_small};
  if (item.estimate > Duration::zero()) {
    const auto workers = static_cast<Duration::rep>(options_.workers);
    const Duration wait = work_ahead(item.priority) / workers;
    if (saturating_add(saturating_add(now, wait), item.estimate) > item.deadline.time_point()) {
      return {Reason::deadline_implausible};
    }
  }
  Admission admission;
  if (size_ >= options_.capacity) {
    admission.shed = shed_for(item.priority);
    if (admission.shed == nullptr) return {Reason::queue_full};
  }
  link(item);
  return admission;
}

QueueItem* DeadlineQueue::shed_for(Priority newcomer) noexcept {
  // The lowest non-empty class below the newcomer's gives up its latest item, parked or not.
  for (std::size_t p = kPriorityCount; p-- > static_cast<std::size_t>(newcomer) + 1;) {
    Class& c = classes_[p];
    QueueItem* victim = c.items.empty() ? nullptr : &*std::prev(c.items.end());
    for (Set& parked : c.parked_by_group) {
      if (parked.empty()) continue;
      QueueItem& latest = *std::prev(parked.end());
      if (victim == nullptr || victim->deadline < latest.deadline) victim = &latest;
    }
    if (victim != nullptr) {
      unlink(*victim);
      return victim;
    }
  }
  return nullptr;
}

QueueItem* DeadlineQueue::pop(TimePoint now, std::vector<DroppedItem>& dropped,
                              const std::function<bool(std::uint32_t)>& can_start) {
  for (Class& c : classes_) {
    while (!c.items.empty()) {
      QueueItem& item = *c.items.begin();
      if (item.deadline.expired(now)) {
        unlink(item);
        dropped.push_back({&item, Reason::expired_in_queue});
        continue;
      }
      if (options_.drop_if_cannot_finish && item.deadline.remaining(now) < item.estimate) {
        unlink(item);
        dropped.push_back({&item, Reason::too_late_to_start});
        continue;
      }
      if (item.group != 0 && can_start && !can_start(item.group)) {
        c.items.erase(c.items.iterator_to(item));
        parked_set(c, item.group).insert(item);
        item.place_ = QueueItem::Place::parked;
        ++c.parked;
        continue;
      }
      unlink(item);
      return &item;
    }
  }
  return nullptr;
}

void DeadlineQueue::expire(TimePoint now, std::vector<DroppedItem>& dropped) {
  auto drain_expired = [&](Set& items) {
    while (!items.empty() && items.begin()->deadline.expired(now)) {
      QueueItem& item = *items.begin();
      unlink(item);
      dropped.push_back({&item, Reason::expired_in_queue});
    }
  };
  for (Class& c : classes_) {
    drain_expired(c.items);
    for (Set& parked : c.parked_by_group) drain_expired(parked);
  }
}

bool DeadlineQueue::unpark(std::uint32_t group) {
  if (group == 0) return false;
  for (Class& c : classes_) {
    if (group > c.parked_by_group.size() || c.parked_by_group[group - 1].empty()) continue;
    Set& parked = c.parked_by_group[group - 1];
    QueueItem& item = *parked.begin();
    parked.erase(parked.iterator_to(item));
    --c.parked;
    c.items.insert(item);
    item.place_ = QueueItem::Place::queued;
    return true;
  }
  return false;
}

bool DeadlineQueue::remove(QueueItem& item) noexcept {
  if (item.place_ == QueueItem::Place::none) return false;
  unlink(item);
  return true;
}

std::vector<QueueItem*> DeadlineQueue::take_all() {
  std::vector<QueueItem*> all;
  all.reserve(size_);
  auto take = [&](Set& items) {
    while (!items.empty()) {
      QueueItem& item = *items.begin();
      unlink(item);
      all.push_back(&item);
    }
  };
  for (Class& c : classes_) take(c.items);
  for (Class& c : classes_) {
    for (Set& parked : c.parked_by_group) take(parked);
  }
  return all;
}

Deadline DeadlineQueue::earliest_deadline() const noexcept {
  Deadline earliest = Deadline::never();
  for (const Class& c : classes_) {
    if (!c.items.empty()) earliest = earlier(earliest, c.items.begin()->deadline);
    for (const Set& parked : c.parked_by_group) {
      if (!parked.empty()) earliest = earlier(earliest, parked.begin()->deadline);
    }
  }
  return earliest;
}

std::size_t DeadlineQueue::size(Priority priority) const noexcept {
  const Class& c = classes_[static_cast<std::size_t>(priority)];
  return c.items.size() + c.parked;
}

Duration DeadlineQueue::work_ahead(Priority priority) const noexcept {
  Duration sum{};
  for (std::size_t p = 0; p <= static_cast<std::size_t>(priority); ++p) {
    if (classes_[p].work > Duration::max() - sum) return Duration::max();
    sum += classes_[p].work;
  }
  return sum;
}

DeadlineQueue::Set& DeadlineQueue::parked_set(Class& c, std::uint32_t group) {
  if (group > c.parked_by_group.size()) c.parked_by_group.resize(group);
  return c.parked_by_group[group - 1];
}

void DeadlineQueue::link(QueueItem& item) {
  Class& c = class_of(item);
  // Jobs with equal budgets arrive in deadline order: then the end is the right place and the
  // hint makes the insertion O(1) amortised.
  c.items.insert(c.items.end(), item);
  c.work += item.estimate;
  item.place_ = QueueItem::Place::queued;
  ++size_;
}

void DeadlineQueue::unlink(QueueItem& item) noexcept {
  Class& c = class_of(item);
  if (item.place_ == QueueItem::Place::parked) {
    Set& parked = c.parked_by_group[item.group - 1];
    parked.erase(parked.iterator_to(item));
    --c.parked;
  } else {
    c.items.erase(c.items.iterator_to(item));
  }
  c.work -= item.estimate;
  item.place_ = QueueItem::Place::none;
  --size_;
}

}  // namespace sandglass

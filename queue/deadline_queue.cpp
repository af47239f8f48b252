#include <sandglass/deadline_queue.hpp>

#include "queue/saturating_ns.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <optional>
#include <thread>
#include <tuple>

namespace sandglass {

namespace {

using detail::add_sat;
using detail::kInf;

std::int64_t ns(Duration d) noexcept { return std::chrono::nanoseconds{d}.count(); }

Duration from_ns(std::int64_t v) noexcept { return std::chrono::nanoseconds{v}; }

}  // namespace

// Treap operations over one of QueueItem's nodes. Keys are (class, deadline, arrival): unique,
// so an item is found again by descending from the root.
struct QueueTree {
  // Where a tree's node sits in an item (the functions below read const items through it).
  using NodeOf = QueueItem::Node& (*)(const QueueItem*) noexcept;
  static QueueItem::Node& items_node(const QueueItem* x) noexcept {
    return const_cast<QueueItem*>(x)->node_;
  }
  static QueueItem::Node& group_node(const QueueItem* x) noexcept { return *x->group_node_; }
  static constexpr NodeOf kItems = &items_node;
  static constexpr NodeOf kGroup = &group_node;

  template <NodeOf N>
  static QueueItem::Node& node(QueueItem* x) noexcept {
    return N(x);
  }
  template <NodeOf N>
  static std::int64_t sum(const QueueItem* x) noexcept {
    return x == nullptr ? 0 : N(x).sum;
  }
  template <NodeOf N>
  static std::int64_t min_slack(const QueueItem* x) noexcept {
    return x == nullptr ? kInf : N(x).min_slack;
  }
  template <NodeOf N>
  static TimePoint min_drop(const QueueItem* x) noexcept {
    return x == nullptr ? TimePoint::max() : N(x).min_drop;
  }

  static bool less(const QueueItem& a, const QueueItem& b) noexcept {
    return std::tie(a.priority, a.deadline, a.seq_) < std::tie(b.priority, b.deadline, b.seq_);
  }

  template <NodeOf N>
  static void pull(QueueItem* x) noexcept {
    QueueItem::Node& n = N(x);
    const std::int64_t left_sum = sum<N>(n.left);
    n.sum = add_sat(add_sat(left_sum, x->counted_), sum<N>(n.right));
    n.min_slack = std::min({min_slack<N>(n.left), add_sat(x->scaled_latest_, -left_sum),
                            add_sat(add_sat(min_slack<N>(n.right), -left_sum), -x->counted_)});
    n.min_drop = std::min({min_drop<N>(n.left), x->drop_at_, min_drop<N>(n.right)});
  }

  // Splits `t` into the items before `key` and the rest.
  template <NodeOf N>
  static void split(QueueItem* t, const QueueItem& key, QueueItem*& before, QueueItem*& rest) {
    if (t == nullptr) {
      before = rest = nullptr;
      return;
    }
    QueueItem::Node& n = N(t);
    if (less(*t, key)) {
      split<N>(n.right, key, n.right, rest);
      before = t;
    } else {
      split<N>(n.left, key, before, n.left);
      rest = t;
    }
    pull<N>(t);
  }

  template <NodeOf N>
  static QueueItem* merge(QueueItem* a, QueueItem* b) {
    if (a == nullptr) return b;
    if (b == nullptr) return a;
    if (N(a).heap >= N(b).heap) {
      N(a).right = merge<N>(N(a).right, b);
      pull<N>(a);
      return a;
    }
    N(b).left = merge<N>(a, N(b).left);
    pull<N>(b);
    return b;
  }

  template <NodeOf N>
  static void insert(QueueItem*& root, QueueItem& x, std::uint32_t heap) {
    QueueItem::Node& n = N(&x);
    n.left = n.right = nullptr;
    n.heap = heap;
    pull<N>(&x);
    QueueItem* before = nullptr;
    QueueItem* rest = nullptr;
    split<N>(root, x, before, rest);
    root = merge<N>(merge<N>(before, &x), rest);
  }

  template <NodeOf N>
  static QueueItem* erase(QueueItem* t, const QueueItem& x) {
    assert(t != nullptr);
    if (t == &x) {
      QueueItem::Node& n = N(t);
      QueueItem* joined = merge<N>(n.left, n.right);
      n.left = n.right = nullptr;
      return joined;
    }
    QueueItem::Node& n = N(t);
    if (less(x, *t)) {
      n.left = erase<N>(n.left, x);
    } else {
      n.right = erase<N>(n.right, x);
    }
    pull<N>(t);
    return t;
  }

  template <NodeOf N>
  static QueueItem* leftmost(QueueItem* t) noexcept {
    if (t == nullptr) return nullptr;
    while (N(t).left != nullptr) t = N(t).left;
    return t;
  }
  template <NodeOf N>
  static QueueItem* rightmost(QueueItem* t) noexcept {
    if (t == nullptr) return nullptr;
    while (N(t).right != nullptr) t = N(t).right;
    return t;
  }

  // Work of the items before `key`.
  template <NodeOf N>
  static std::int64_t prefix(const QueueItem* t, const QueueItem& key) noexcept {
    std::int64_t acc = 0;
    while (t != nullptr) {
      const QueueItem::Node& n = N(t);
      if (less(*t, key)) {
        acc = add_sat(acc, add_sat(sum<N>(n.left), t->counted_));
        t = n.right;
      } else {
        t = n.left;
      }
    }
    return acc;
  }

  // The least (scaled latest start − work before it) over the items after `key`.
  template <NodeOf N>
  static std::int64_t min_slack_after(const QueueItem* t, const QueueItem& key) noexcept {
    std::int64_t best = kInf;
    std::int64_t acc = 0;
    while (t != nullptr) {
      const QueueItem::Node& n = N(t);
      const std::int64_t before_t = add_sat(acc, sum<N>(n.left));
      if (less(key, *t)) {
        best = std::min(best, add_sat(t->scaled_latest_, -before_t));
        best = std::min(best, add_sat(add_sat(min_slack<N>(n.right), -before_t), -t->counted_));
        t = n.left;
      } else {
        acc = add_sat(before_t, t->counted_);
        t = n.right;
      }
    }
    return best;
  }

  // The item with the earliest drop time.
  template <NodeOf N>
  static QueueItem* first_to_drop(QueueItem* t) noexcept {
    while (t != nullptr) {
      const QueueItem::Node& n = N(t);
      if (n.left != nullptr && min_drop<N>(n.left) == n.min_drop) {
        t = n.left;
      } else if (t->drop_at_ == n.min_drop) {
        return t;
      } else {
        t = n.right;
      }
    }
    return nullptr;
  }

  template <NodeOf N>
  static void clear(QueueItem* t) noexcept {
    if (t == nullptr) return;
    clear<N>(N(t).left);
    clear<N>(N(t).right);
    N(t).left = N(t).right = nullptr;
    t->place_ = QueueItem::Place::none;
    t->unparked_ = false;
  }
};

namespace {
constexpr auto kItems = QueueTree::kItems;
constexpr auto kGroup = QueueTree::kGroup;
}  // namespace

DeadlineQueue::DeadlineQueue(DeadlineQueueOptions options) : options_{std::move(options)} {
  options_.workers = std::max<std::size_t>(options_.workers, 1);
  for (std::size_t& limit : options_.group_limits) limit = std::max<std::size_t>(limit, 1);
  groups_.resize(options_.group_limits.size());
  for (auto& order : order_) order.store(std::numeric_limits<std::int64_t>::min(), std::memory_order_relaxed);
}

DeadlineQueue::~DeadlineQueue() {
  // Marks what is left unqueued.
  for (QueueItem* x = inbox_.exchange(nullptr, std::memory_order_acquire); x != nullptr;) {
    QueueItem* next = x->inbox_next();
    x->inbox_next() = nullptr;
    x->place_ = QueueItem::Place::none;
    x = next;
  }
  for (Class& c : classes_) {
    QueueTree::clear<kItems>(c.items.root);
    for (QueueItem* x = c.run.head; x != nullptr;) {
      QueueItem* next = x->node_.right;
      x->node_.left = x->node_.right = nullptr;
      x->place_ = QueueItem::Place::none;
      x->in_run_ = false;
      x = next;
    }
    for (Tree& parked : c.parked_by_group) QueueTree::clear<kItems>(parked.root);
  }
}

std::int64_t DeadlineQueue::class_prefix(const Class& c, const QueueItem& key) const noexcept {
  const std::int64_t in_tree = c.items_max == nullptr || QueueTree::less(*c.items_max, key)
                                   ? QueueTree::sum<kItems>(c.items.root)
                                   : QueueTree::prefix<kItems>(c.items.root, key);
  // A key inside the run (a newcomer that joins it a few items from its tail, or
  // predicted_start's question): less the items after the key, walked from the tail.
  std::int64_t in_run = c.run.sum;
  for (const QueueItem* x = c.run.tail; x != nullptr && !QueueTree::less(*x, key); x = x->node_.left) {
    in_run = add_sat(in_run, -x->counted_);
  }
  return add_sat(in_tree, in_run);
}

void DeadlineQueue::tree_insert(Class& c, QueueItem& item) {
  QueueTree::insert<kItems>(c.items.root, item, next_heap());
  ++c.items.size;
  if (c.items_max == nullptr || QueueTree::less(*c.items_max, item)) c.items_max = &item;
  if (c.items_min == nullptr || QueueTree::less(item, *c.items_min)) c.items_min = &item;
}

void DeadlineQueue::tree_erase(Class& c, QueueItem& item) noexcept {
  c.items.root = QueueTree::erase<kItems>(c.items.root, item);
  --c.items.size;
  if (c.items_max == &item) c.items_max = QueueTree::rightmost<kItems>(c.items.root);
  if (c.items_min == &item) c.items_min = QueueTree::leftmost<kItems>(c.items.root);
}

void DeadlineQueue::run_push(Class& c, QueueItem& item) noexcept {
  item.node_.left = c.run.tail;
  item.node_.right = nullptr;
  if (c.run.tail != nullptr) {
    c.run.tail->node_.right = &item;
  } else {
    c.run.head = &item;
  }
  c.run.tail = &item;
  ++c.run.size;
  c.run.sum = add_sat(c.run.sum, item.counted_);
  item.in_run_ = true;
}

bool DeadlineQueue::run_place(const Class& c, const QueueItem& item, const QueueItem& key,
                              TimePoint drop_at, RunPlace& place) noexcept {
  if (item.group != 0) return false;
  if (c.items_max != nullptr && !QueueTree::less(*c.items_max, key)) return false;
  if (c.run.segment_count == 0) {
    place = {.after = nullptr, .disorder = Duration::zero(), .new_segment = true};
    return true;
  }
  const RunSegment& last = c.run.segments[c.run.segment_count - 1];
  // The items behind it (the few it overtakes, all of the last segment) against its drop time.
  Duration need{};
  QueueItem* prev = c.run.tail;
  bool overtakes_first = false;  // it then becomes the last segment's first
  for (std::size_t walked = 0; prev != nullptr && QueueTree::less(key, *prev); ++walked) {
    if (walked == kRunWalkBack || overtakes_first) return false;
    need = std::max(need, drop_at - prev->drop_at_);
    overtakes_first = prev == last.first;
    prev = prev->node_.left;
  }
  if (prev == c.run.tail) {
    // Appended: against the latest drop time in the last segment (max_drop); too far before
    // it (a tail estimate that jumped), it begins a segment of its own if one is free.
    need = std::max(need, last.max_drop - drop_at);
    if (need > kRunDisorder) {
      if (c.run.segment_count == kRunSegments) return false;
      place = {.after = prev, .disorder = Duration::zero(), .new_segment = true};
      return true;
    }
  } else if (!overtakes_first && drop_at < prev->drop_at_) {
    // Among them: not before the item ahead of it, which is at most the disorder before any
    // item ahead of it in the segment (so neither is this one).
    return false;
  }
  if (need > kRunDisorder) return false;
  place = {.after = prev, .disorder = std::max(last.disorder, need), .new_segment = false};
  return true;
}

void DeadlineQueue::run_insert(Class& c, QueueItem& item, const RunPlace& place) noexcept {
  if (place.new_segment) {
    c.run.segments[c.run.segment_count++] = {.first = &item, .disorder = Duration::zero(),
                                             .max_drop = item.drop_at_};
  } else {
    RunSegment& last = c.run.segments[c.run.segment_count - 1];
    last.disorder = place.disorder;
    last.max_drop = std::max(last.max_drop, item.drop_at_);
  }
  QueueItem* const after = place.after;
  if (after == c.run.tail) {
    run_push(c, item);
    return;
  }
  QueueItem* next = after != nullptr ? after->node_.right : c.run.head;
  // Before the last segment's first: it is the first now (run_place allows no earlier one).
  RunSegment& last = c.run.segments[c.run.segment_count - 1];
  if (next == last.first) last.first = &item;
  item.node_.left = after;
  item.node_.right = next;
  (after != nullptr ? after->node_.right : c.run.head) = &item;
  next->node_.left = &item;
  ++c.run.size;
  c.run.sum = add_sat(c.run.sum, item.counted_);
  item.in_run_ = true;
}

void DeadlineQueue::run_erase(Class& c, QueueItem& item) noexcept {
  QueueItem* prev = item.node_.left;
  QueueItem* next = item.node_.right;
  // A segment's first: the next item takes its place, unless it begins the next segment (or
  // the run ends), when the segment is empty. Most often the run's head, the first segment's.
  for (std::size_t s = 0; s < c.run.segment_count; ++s) {
    if (c.run.segments[s].first != &item) continue;
    const bool next_is_ours = next != nullptr && next != segment_end(c.run, s);
    if (next_is_ours) {
      c.run.segments[s].first = next;
    } else {
      std::copy(c.run.segments.begin() + static_cast<std::ptrdiff_t>(s + 1),
                c.run.segments.begin() + static_cast<std::ptrdiff_t>(c.run.segment_count),
                c.run.segments.begin() + static_cast<std::ptrdiff_t>(s));
      c.run.segments[--c.run.segment_count] = {};
    }
    break;
  }
  (prev != nullptr ? prev->node_.right : c.run.head) = next;
  (next != nullptr ? next->node_.left : c.run.tail) = prev;
  item.node_.left = item.node_.right = nullptr;
  --c.run.size;
  c.run.sum = add_sat(c.run.sum, -item.counted_);
  item.in_run_ = false;
}

void DeadlineQueue::flush_run(Class& c) {
  while (QueueItem* item = c.run.head) {
    run_erase(c, *item);
    tree_insert(c, *item);
  }
}

QueueItem* DeadlineQueue::class_front(Class& c) noexcept {
  QueueItem* in_tree = c.items_min;
  QueueItem* in_run = c.run.head;
  if (in_tree == nullptr) return in_run;
  if (in_run == nullptr) return in_tree;
  return QueueTree::less(*in_run, *in_tree) ? in_run : in_tree;
}

std::uint32_t DeadlineQueue::next_heap() noexcept {
  // xorshift64: the treap only needs priorities that do not follow the keys.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  return static_cast<std::uint32_t>(rng_ >> 32);
}

std::size_t DeadlineQueue::limit_of(std::uint32_t group) const noexcept {
  if (group == 0 || group > options_.group_limits.size()) return options_.workers;
  return options_.group_limits[group - 1];
}

DeadlineQueue::Group& DeadlineQueue::group_of(std::uint32_t group) {
  if (group > groups_.size()) groups_.resize(group);
  return groups_[group - 1];
}

std::int64_t DeadlineQueue::higher_work(Priority priority) const noexcept {
  std::int64_t sum = 0;
  for (std::size_t p = 0; p < static_cast<std::size_t>(priority); ++p) {
    sum = add_sat(sum, classes_[p].work);
  }
  return sum;
}

std::int64_t DeadlineQueue::scaled(TimePoint t) const noexcept {
  // Relative to the origin, clamped to ±2^50 ns (13 days), then × workers (≤ 2^12 counted).
  constexpr std::int64_t kSpan = std::int64_t{1} << 50;
  const std::int64_t rel = std::clamp<std::int64_t>(ns(saturating_sub(t, origin_)), -kSpan, kSpan);
  const auto workers = static_cast<std::int64_t>(std::min<std::size_t>(options_.workers, 4096));
  return rel * workers;
}

TimePoint DeadlineQueue::predicted_start(const QueueItem& item, TimePoint now, Load load) const {
  QueueItem key = {};
  key.priority = item.priority;
  key.deadline = item.deadline;
  key.seq_ = std::numeric_limits<std::uint64_t>::max();  // after every queued item's arrival
  const Class& c = classes_[static_cast<std::size_t>(item.priority)];
  const std::int64_t ahead = add_sat(higher_work(item.priority), class_prefix(c, key));
  TimePoint start = saturating_add(
      saturating_add(now, from_ns(ahead / static_cast<std::int64_t>(options_.workers))),
      std::max(load.busy_for, Duration::zero()));
  if (item.group != 0 && item.group <= groups_.size()) {
    const std::int64_t group_ahead = QueueTree::prefix<kGroup>(groups_[item.group - 1].all.root, key);
    const auto limit = static_cast<std::int64_t>(limit_of(item.group));
    start = std::max(start, saturating_add(saturating_add(now, from_ns(group_ahead / limit)),
                                           std::max(load.group_busy_for, Duration::zero())));
  }
  return start;
}

Admission DeadlineQueue::admit(QueueItem& item, TimePoint now, Load load) {
  for (;;) {
    if (std::optional<Admission> decided = try_admit(item, now, load)) return *decided;
    std::this_thread::yield();  // a submitter between its reservation and its push
  }
}

std::optional<Admission> DeadlineQueue::try_admit(QueueItem& item, TimePoint now, Load load) {
  assert(item.place_ == QueueItem::Place::none);
  if (closed()) return Admission{Reason::shutting_down};
  if (!has_origin_) {
    origin_ = now;
    has_origin_ = true;
  }
  item.estimate = std::max(item.estimate, Duration::zero());
  item.work = std::max(item.work, Duration::zero());
  const Duration left = item.deadline.remaining(now);
  if (left < options_.min_useful || left == Duration::zero()) return Admission{Reason::budget_too_small};
  item.counted_ = ns(item.work > Duration::zero() ? item.work : item.estimate);
  // Against the lock-free path: reserve as it does (its bounds then include this item), take
  // a place in the class's order (claims in flight fail and look again), and decide only once
  // every item admitted before is linked, so that the decision sees them all. The class's
  // order stays raised when nothing is decided: later lock-free claims below it take the
  // locked way, which is always allowed.
  reserve(item);
  claim_order(item.priority, item.deadline.time_point());
  if (!try_settle(1)) {
    release(item);  // the owner's way back (see released_)
    return std::nullopt;
  }
  const Admission admission = decide(item, now, load);
  if (!admission.admitted()) release(item);  // the owner's way back (see released_)
  return admission;
}

Admission DeadlineQueue::decide(QueueItem& item, TimePoint now, Load load) {
  // The items of its class that the newcomer overtakes: in the tree, or the last few of the
  // run when it can join the run among them (the first of them; null: none in the run).
  QueueItem* overtaken_in_run = nullptr;
  {
    // A newcomer that would overtake part of its class's run (its tail, often a few items that
    // concurrent submitters reordered) joins the run among them if it can (run_place: a few
    // items, drop times in order); else that part goes into the tree, where prefix sums and
    // slacks answer for any key. The rest of the run stays before the newcomer.
    QueueItem key = {};
    key.priority = item.priority;
    key.deadline = item.deadline;
    key.seq_ = std::numeric_limits<std::uint64_t>::max();
    Class& c = class_of(item);
    RunPlace place;
    if (run_place(c, item, key, drop_time(item), place)) {
      overtaken_in_run = place.after != nullptr ? place.after->node_.right : c.run.head;
    } else {
      while (c.run.tail != nullptr && QueueTree::less(key, *c.run.tail)) {
        QueueItem& last = *c.run.tail;
        run_erase(c, last);
        tree_insert(c, last);
      }
    }
  }
  // Computed once: the rejection reports it (Admission::predicted_start).
  std::optional<TimePoint> start;
  const bool limited = load.start_within != Duration::max();
  if (item.estimate > Duration::zero() || limited) start = predicted_start(item, now, load);
  if (item.estimate > Duration::zero() &&
      saturating_add(saturating_add(*start, item.estimate), std::max(load.margin, Duration::zero())) >
          item.deadline.time_point()) {
    return {.reason = Reason::deadline_implausible, .predicted_start = *start};
  }
  if (limited && *start > saturating_add(now, load.start_within)) {
    return {.reason = Reason::queue_full, .beyond_target = true, .predicted_start = *start};
  }
  if (item.counted_ > 0) {
    // The tightest item this one would overtake in its class, in workers × time: its latest
    // start against when it is predicted to start (now + busy_for + work before it ÷ workers).
    QueueItem key = {};
    key.priority = item.priority;
    key.deadline = item.deadline;
    key.seq_ = std::numeric_limits<std::uint64_t>::max();
    const Class& c = class_of(item);
    const std::int64_t common =
        add_sat(scaled(saturating_add(now, std::max(load.busy_for, Duration::zero()))),
                higher_work(item.priority));
    std::int64_t slack = kInf;
    if (overtaken_in_run == nullptr) {
      // The class's run is all before the newcomer (decide moved the rest into the tree), and
      // so before every item it overtakes: its work counts for them as well.
      const std::int64_t base = add_sat(common, c.run.sum);
      // Items it overtakes are in the tree: none when it comes last.
      const std::int64_t tightest = c.items_max == nullptr || QueueTree::less(*c.items_max, key)
                                        ? kInf
                                        : QueueTree::min_slack_after<kItems>(c.items.root, key);
      if (tightest != kInf) slack = add_sat(tightest, -base);
    } else {
      // It overtakes the run's last few items only (run_place: no tree item comes after it).
      // Each starts after the whole tree and the run items before it.
      std::int64_t before = add_sat(QueueTree::sum<kItems>(c.items.root), c.run.sum);
      for (const QueueItem* x = c.run.tail;; x = x->node_.left) {
        before = add_sat(before, -x->counted_);
        slack = std::min(slack, add_sat(add_sat(x->scaled_latest_, -before), -common));
        if (x == overtaken_in_run) break;
      }
    }
    if (slack != kInf && slack >= 0 && slack < item.counted_) {
      return {.reason = Reason::deadline_implausible,
              .predicted_start = start ? *start : predicted_start(item, now, load)};
    }
  }
  Admission admission;
  if (size_ >= options_.capacity) {
    admission.shed = shed_for(item.priority);
    if (admission.shed == nullptr) return {Reason::queue_full};
  }
  item.note_predicted_start(start.value_or(TimePoint{}));
  link(item);
  return admission;
}

QueueItem* DeadlineQueue::shed_for(Priority newcomer) noexcept {
  // The lowest non-empty class below the newcomer's gives up its latest item, parked or not.
  for (std::size_t p = kPriorityCount; p-- > static_cast<std::size_t>(newcomer) + 1;) {
    Class& c = classes_[p];
    QueueItem* victim = c.items_max;
    if (c.run.tail != nullptr && (victim == nullptr || QueueTree::less(*victim, *c.run.tail))) {
      victim = c.run.tail;
    }
    for (Tree& parked : c.parked_by_group) {
      QueueItem* latest = QueueTree::rightmost<kItems>(parked.root);
      if (latest != nullptr && (victim == nullptr || victim->deadline < latest->deadline)) {
        victim = latest;
      }
    }
    if (victim != nullptr) {
      unlink(*victim);
      return victim;
    }
  }
  return nullptr;
}

QueueItem* DeadlineQueue::front() noexcept {
  for (Class& c : classes_) {
    if (QueueItem* first = class_front(c)) return first;
  }
  return nullptr;
}

void DeadlineQueue::refill(const std::function<bool(std::uint32_t)>& can_start) {
  if (!can_start) return;
  for (std::uint32_t g = 1; g <= groups_.size(); ++g) {
    const Group& group = groups_[g - 1];
    if (group.parked > 0 && group.unparked == 0 && can_start(g)) unpark_one(g);
  }
}

QueueItem* DeadlineQueue::pop(TimePoint now, std::vector<DroppedItem>& dropped,
                              const std::function<bool(std::uint32_t)>& can_start) {
  QueueItem* item = take(now, dropped, can_start);
  if (item != nullptr) release(*item);
  return item;
}

QueueItem* DeadlineQueue::take(TimePoint now, std::vector<DroppedItem>& dropped,
                               const std::function<bool(std::uint32_t)>& can_start) {
  splice();
  refill(can_start);
  while (QueueItem* found = front()) {
    QueueItem& item = *found;
    Reason drop = Reason::ok;
    if (item.deadline.expired(now)) {
      drop = Reason::expired_in_queue;
    } else if (options_.drop_if_cannot_finish && item.deadline.remaining(now) < item.estimate) {
      drop = Reason::too_late_to_start;
    }
    if (drop != Reason::ok) {
      const bool was_unparked = item.unparked_;
      unlink(item);
      dropped.push_back({&item, drop});
      if (was_unparked) refill(can_start);  // the next parked item takes its turn at once
      continue;
    }
    if (item.group != 0 && can_start && !can_start(item.group)) {
      park(item);
      continue;
    }
    unlink(item, false);
    return &item;
  }
  return nullptr;
}

void DeadlineQueue::expire(TimePoint now, std::vector<DroppedItem>& dropped) {
  splice();
  auto drain = [&](Tree& tree) {
    while (tree.root != nullptr && kItems(tree.root).min_drop <= now) {
      QueueItem& item = *QueueTree::first_to_drop<kItems>(tree.root);
      const bool expired = item.deadline.expired(now);
      if (!expired && !(options_.drop_if_cannot_finish && item.deadline.remaining(now) < item.estimate)) {
        return;  // exactly at its latest start: not late yet (next_drop_time says when)
      }
      unlink(item);
      dropped.push_back({&item, expired ? Reason::expired_in_queue : Reason::too_late_to_start});
    }
  };
  for (Class& c : classes_) {
    drain(c.items);
    // The run's drop times grow from its head, but for its disorder: once one seen is more
    // than that after `now`, every one behind it is after `now`.
    // Found first, unlinked after: unlinking changes the segments.
    const std::size_t found_from = dropped.size();
    for (std::size_t s = 0; s < c.run.segment_count; ++s) {
      const RunSegment& segment = c.run.segments[s];
      const QueueItem* const end = segment_end(c.run, s);
      TimePoint seen = TimePoint::min();
      for (QueueItem* x = segment.first; x != end; x = x->node_.right) {
        QueueItem& item = *x;
        seen = std::max(seen, item.drop_at_);
        if (item.drop_at_ <= now) {
          const bool expired = item.deadline.expired(now);
          if (expired || (options_.drop_if_cannot_finish && item.deadline.remaining(now) < item.estimate)) {
            dropped.push_back({&item, expired ? Reason::expired_in_queue : Reason::too_late_to_start});
          }
        }
        if (saturating_add(seen, -segment.disorder) > now) break;
      }
    }
    for (std::size_t d = found_from; d < dropped.size(); ++d) unlink(*dropped[d].item);
    for (Tree& parked : c.parked_by_group) drain(parked);
  }
}

Deadline DeadlineQueue::next_drop_time() const noexcept {
  TimePoint next = TimePoint::max();
  for (const Class& c : classes_) {
    next = std::min(next, QueueTree::min_drop<kItems>(c.items.root));
    // The earliest within each run segment's disorder of its first (see expire).
    for (std::size_t s = 0; s < c.run.segment_count; ++s) {
      const RunSegment& segment = c.run.segments[s];
      const QueueItem* const end = segment_end(c.run, s);
      TimePoint seen = TimePoint::min();
      for (const QueueItem* x = segment.first; x != end; x = x->node_.right) {
        next = std::min(next, x->drop_at_);
        seen = std::max(seen, x->drop_at_);
        if (saturating_add(seen, -segment.disorder) >= next) break;
      }
    }
    for (const Tree& parked : c.parked_by_group) {
      next = std::min(next, QueueTree::min_drop<kItems>(parked.root));
    }
  }
  if (next == TimePoint::max()) return Deadline::never();
  // A latest start is passed one tick after it (less time left than the estimate).
  return Deadline::at(options_.drop_if_cannot_finish ? saturating_add(next, Duration{1}) : next);
}

void DeadlineQueue::park(QueueItem& item) {
  Class& c = class_of(item);
  tree_erase(c, item);
  Group& group = group_of(item.group);
  if (item.unparked_) {
    item.unparked_ = false;
    --group.unparked;
  }
  Tree& parked = parked_tree(c, item.group);
  QueueTree::insert<kItems>(parked.root, item, next_heap());
  ++parked.size;
  ++c.parked;
  ++group.parked;
  item.place_ = QueueItem::Place::parked;
}

bool DeadlineQueue::unpark_one(std::uint32_t group) {
  for (Class& c : classes_) {
    if (group > c.parked_by_group.size()) continue;
    Tree& parked = c.parked_by_group[group - 1];
    if (parked.root == nullptr) continue;
    QueueItem& item = *QueueTree::leftmost<kItems>(parked.root);
    parked.root = QueueTree::erase<kItems>(parked.root, item);
    --parked.size;
    --c.parked;
    Group& g = groups_[group - 1];
    --g.parked;
    ++g.unparked;
    tree_insert(c, item);
    item.place_ = QueueItem::Place::queued;
    item.unparked_ = true;
    return true;
  }
  return false;
}

bool DeadlineQueue::unpark(std::uint32_t group) {
  if (group == 0 || group > groups_.size()) return false;
  return unpark_one(group);
}

bool DeadlineQueue::remove(QueueItem& item) noexcept {
  if (item.place_ == QueueItem::Place::none) return false;
  if (item.place_ == QueueItem::Place::inbox) splice();
  unlink(item);
  return true;
}

std::vector<QueueItem*> DeadlineQueue::take_all() {
  for (;;) {
    if (std::optional<std::vector<QueueItem*>> all = try_take_all()) return std::move(*all);
    std::this_thread::yield();  // a submitter between its reservation and its push
  }
}

std::optional<std::vector<QueueItem*>> DeadlineQueue::try_take_all() {
  if (!try_settle(0)) return std::nullopt;
  std::vector<QueueItem*> all;
  all.reserve(size_);
  auto take = [&](Tree& tree) {
    while (tree.root != nullptr) {
      QueueItem& item = *QueueTree::leftmost<kItems>(tree.root);
      unlink(item);
      all.push_back(&item);
    }
  };
  for (Class& c : classes_) {
    flush_run(c);
    take(c.items);
  }
  for (Class& c : classes_) {
    for (Tree& parked : c.parked_by_group) take(parked);
  }
  return all;
}

Deadline DeadlineQueue::earliest_deadline() const noexcept {
  Deadline earliest = Deadline::never();
  auto consider = [&](const Tree& tree) {
    if (const QueueItem* first = QueueTree::leftmost<kItems>(tree.root)) {
      earliest = earlier(earliest, first->deadline);
    }
  };
  for (const Class& c : classes_) {
    consider(c.items);
    if (c.run.head != nullptr) earliest = earlier(earliest, c.run.head->deadline);
    for (const Tree& parked : c.parked_by_group) consider(parked);
  }
  return earliest;
}

std::size_t DeadlineQueue::size(Priority priority) const noexcept {
  const Class& c = classes_[static_cast<std::size_t>(priority)];
  return c.items.size + c.run.size + c.parked;
}

std::size_t DeadlineQueue::parked(std::uint32_t group) const noexcept {
  if (group == 0 || group > groups_.size()) return 0;
  return groups_[group - 1].parked;
}

Duration DeadlineQueue::work_ahead(Priority priority) const noexcept {
  return from_ns(add_sat(higher_work(priority), classes_[static_cast<std::size_t>(priority)].work));
}

DeadlineQueue::Tree& DeadlineQueue::parked_tree(Class& c, std::uint32_t group) {
  if (group > c.parked_by_group.size()) c.parked_by_group.resize(group);
  return c.parked_by_group[group - 1];
}

void DeadlineQueue::link(QueueItem& item) {
  // First, so that a failed allocation leaves the queue as it was.
  if (item.group != 0 && item.group_node_ == nullptr) item.group_node_ = std::make_unique<QueueItem::Node>();
  Class& c = class_of(item);
  item.seq_ = ++next_seq_;
  const TimePoint latest_start = saturating_add(item.deadline.time_point(), -item.estimate);
  item.scaled_latest_ = scaled(latest_start);
  item.drop_at_ = drop_time(item);
  item.unparked_ = false;
  // Into the run when it comes last in its class, or a few items before the run's end, by
  // deadline and by latest start.
  RunPlace place;
  if (run_place(c, item, item, item.drop_at_, place)) {
    run_insert(c, item, place);
  } else {
    tree_insert(c, item);
  }
  c.work = add_sat(c.work, item.counted_);
  if (item.group != 0) {
    Group& group = group_of(item.group);
    QueueTree::insert<kGroup>(group.all.root, item, next_heap());
    ++group.all.size;
  }
  item.place_ = QueueItem::Place::queued;
  ++size_;
}

void DeadlineQueue::unlink(QueueItem& item, bool release_it) noexcept {
  Class& c = class_of(item);
  if (item.place_ == QueueItem::Place::parked) {
    Tree& parked = c.parked_by_group[item.group - 1];
    parked.root = QueueTree::erase<kItems>(parked.root, item);
    --parked.size;
    --c.parked;
    --groups_[item.group - 1].parked;
  } else if (item.in_run_) {
    run_erase(c, item);
  } else {
    tree_erase(c, item);
    if (item.unparked_) --groups_[item.group - 1].unparked;
  }
  if (item.group != 0) {
    Group& group = groups_[item.group - 1];
    group.all.root = QueueTree::erase<kGroup>(group.all.root, item);
    --group.all.size;
  }
  c.work = add_sat(c.work, -item.counted_);
  item.unparked_ = false;
  item.place_ = QueueItem::Place::none;
  --size_;
  if (release_it) release(item);
}

}  // namespace sandglass

// deadline_queue_parts.hpp (internal) — the containers DeadlineQueue keeps its items in: each
// class's treap and in-order run, the parked sets and the bulkhead groups. Only
// deadline_queue.hpp includes this; the rules that use them are in queue/deadline_queue.cpp (see
// the comment of deadline_queue.hpp for the order, the run and its segments).
//
// Thread safety: plain data, guarded by the queue's owner.
#pragma once

#include <sandglass/deadline.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace sandglass {

struct QueueItem;

namespace detail {

// QueueItem::predicted_start's "no prediction".
inline constexpr std::int32_t kNoPredictedSlack = std::numeric_limits<std::int32_t>::min();

// A treap node: children, heap priority and what the subtree sums up.
struct QueueNode {
  QueueItem* left = nullptr;
  QueueItem* right = nullptr;
  std::uint32_t heap = 0;
  // Not the tree's: QueueItem::predicted_start as the deadline less it, in the padding here
  // (a record of a job fits malloc's 256-byte chunk only without 8 bytes more).
  std::int32_t predicted_slack_us = kNoPredictedSlack;
  std::int64_t sum = 0;        // work of the subtree, ns
  std::int64_t min_slack = 0;  // min over the subtree of scaled latest start − work before
  TimePoint min_drop{};        // earliest drop time in the subtree
};

// A treap's root and size.
struct TreeRoot {
  QueueItem* root = nullptr;
  std::size_t size = 0;
};

// A stretch of the run whose drop times are nearly in order: an item's is at most `disorder`
// (≤ kRunDisorder) before that of any item ahead of it in the segment, so `expire` and
// `next_drop_time` look at the items within `disorder` of the segment's first only. `max_drop`
// bounds every drop time in the segment from above. A segment ends where the next one begins
// (or with the run).
struct RunSegment {
  QueueItem* first = nullptr;
  Duration disorder{};
  TimePoint max_drop = TimePoint::min();
};

// Segments a run may have: an appended item whose drop time is more than kRunDisorder before
// the last segment's latest starts a new one (a tail estimate that jumped); with this many, it
// goes to the tree.
inline constexpr std::size_t kRunSegments = 4;

// Items in key order, in up to kRunSegments segments.
struct Run {
  QueueItem* head = nullptr;
  QueueItem* tail = nullptr;
  std::size_t size = 0;
  std::int64_t sum = 0;                             // their work, ns
  std::array<RunSegment, kRunSegments> segments{};  // the first `segment_count`, in order
  std::size_t segment_count = 0;                    // zero exactly when the run is empty
};

// Where an item joins a run (run_place): after `after` (nullptr: at the head), with the last
// segment's `disorder` then, or as the first of a new segment at the run's end.
struct RunPlace {
  QueueItem* after = nullptr;
  Duration disorder{};
  bool new_segment = false;
};

// One priority class: its treap, its run, its parked sets.
struct QueueClass {
  TreeRoot items;
  QueueItem* items_max = nullptr;  // the last item of `items`
  // The first item of `items`: every pop compares it with the run's head, and finding it anew
  // walks the tree's left spine (a cache miss per level in a deep queue).
  QueueItem* items_min = nullptr;
  Run run;
  std::vector<TreeRoot> parked_by_group;  // indexed by group - 1
  std::int64_t work = 0;  // work of this class's items, parked ones included, ns
  std::size_t parked = 0;
};

// One bulkhead group: all its items in one treap.
struct QueueGroup {
  TreeRoot all;  // queued and parked, by (class, deadline, arrival)
  std::size_t parked = 0;
  std::size_t unparked = 0;  // unparked items still in their class
};

}  // namespace detail
}  // namespace sandglass

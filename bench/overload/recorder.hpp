// recorder.hpp — `Recorder`: the fate of every job of one run (a load point, a spike or a
// warm-up), one slot per scheduled arrival, written once by whichever thread decided it.
//
//   Recorder rec{start, arrivals};
//   rec.submitted(i, Clock::now());              // the generator, just before handing job i over
//   rec.completed(i, end, busy);                 // a worker: on time or late, by its deadline
//   rec.wait_finished(arrivals.size(), until);   // Blocks
//   for (const JobRecord& r : rec.records()) ...
//
// Thread safety: `submitted` is called by the generator only, before it hands the job over.
// Each job then gets exactly one of `completed`, `cancelled`, `failed`, `rejected`, `expired`,
// from any thread. `records()` may be read once `wait_finished` returned true for all jobs.
#pragma once

#include "schedule.hpp"

#include <sandglass/deadline.hpp>
#include <sandglass/reason.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sandglass::bench {

enum class Fate : std::uint8_t {
  pending,
  on_time,    // completed before its deadline: goodput
  late,       // completed after its deadline
  rejected,   // never admitted (or shed); see `reason`
  expired,    // left the queue without running: its deadline passed (or could not be met)
  cancelled,  // stopped while running
  failed,     // the body threw something other than a cancellation
};

struct JobRecord {
  TimePoint submitted{};  // handed to the policy (its lag behind the schedule is the generator's)
  TimePoint ended{};      // fate decided
  Duration busy{};        // time a worker spent running it
  Fate fate = Fate::pending;
  Reason reason = Reason::ok;  // for `rejected` and `expired`: why
};

class Recorder {
 public:
  // `arrivals` must outlive the recorder.
  Recorder(TimePoint start, std::span<const Arrival> arrivals);

  TimePoint start() const noexcept { return start_; }
  std::size_t size() const noexcept { return arrivals_.size(); }
  const Arrival& arrival(std::size_t i) const noexcept { return arrivals_[i]; }
  TimePoint scheduled(std::size_t i) const noexcept { return start_ + arrivals_[i].at; }
  TimePoint deadline(std::size_t i) const noexcept { return scheduled(i) + arrivals_[i].budget; }

  void submitted(std::size_t i, TimePoint at) noexcept { records_[i].submitted = at; }
  // On time when `end` is not after the job's deadline; late otherwise.
  void completed(std::size_t i, TimePoint end, Duration busy) noexcept;
  void cancelled(std::size_t i, TimePoint end, Duration busy) noexcept;
  void failed(std::size_t i, TimePoint end, Duration busy) noexcept;
  void rejected(std::size_t i, TimePoint end, Reason reason) noexcept;
  // `reason`: expired_in_queue, or too_late_to_start when dropped because it could not finish.
  void expired(std::size_t i, TimePoint end, Reason reason = Reason::expired_in_queue) noexcept;

  // Blocks until at least `count` jobs have a fate or `until` passed. True if they have.
  bool wait_finished(std::size_t count, TimePoint until) const;
  std::size_t finished() const noexcept { return finished_.load(std::memory_order_acquire); }

  std::span<const JobRecord> records() const noexcept { return records_; }

 private:
  void finish(std::size_t i, Fate fate, TimePoint end, Duration busy, Reason reason) noexcept;

  TimePoint start_;
  std::span<const Arrival> arrivals_;
  std::vector<JobRecord> records_;
  std::atomic<std::size_t> finished_{0};
};

}  // namespace sandglass::bench

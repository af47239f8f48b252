// run.hpp — drives one policy through one arrival schedule, open loop, and waits until every
// job has its fate.
//
//   warm_up(*policy, service, workers, seed);     // the same for every policy
//   RunData data = run_arrivals(*policy, arrivals);
//   summarize(..., data);
//
// The generator submits job i at its scheduled time (start + arrivals[i].at) whatever the
// policy did with earlier jobs; when it falls behind it submits back to back. A job's latency
// is measured from its scheduled time, its deadline is that time plus its budget.
//
// A run ends when every job has its fate. If some are still queued once every deadline of the
// run has passed (a FIFO's backlog), the policy abandons them: they are recorded as expired in
// the queue, which is what they are; a FIFO would have run them later, all late.
//
// Thread safety: call from one thread; Blocks.
#pragma once

#include "distribution.hpp"
#include "policy.hpp"
#include "recorder.hpp"
#include "schedule.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace sandglass::bench {

struct RunData {
  std::unique_ptr<Recorder> recorder;
  std::size_t peak_queue_depth = 0;
  std::size_t peak_rss_bytes = 0;
  std::size_t abandoned = 0;  // jobs still waiting when every deadline had passed
  bool complete = true;       // every job got a fate (false: the policy lost some)
};

// `arrivals` must outlive the result.
RunData run_arrivals(Policy& policy, std::span<const Arrival> arrivals);

// Runs `jobs` jobs with generous deadlines through `policy` in waves of `workers`, so that
// Sandglass's service-time estimates are warm and every pool has started its threads.
void warm_up(Policy& policy, const Distribution& service, std::size_t workers, std::size_t jobs,
             std::uint64_t seed);

// Lowers this thread's timer slack (how late the kernel may wake it) while it lives.
class TimerSlack {
 public:
  explicit TimerSlack(Duration slack);
  ~TimerSlack();
  TimerSlack(const TimerSlack&) = delete;
  TimerSlack& operator=(const TimerSlack&) = delete;

 private:
  long previous_ns_;
};

}  // namespace sandglass::bench

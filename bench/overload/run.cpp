#include "run.hpp"

#include "rss_sampler.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <random>
#include <thread>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

// How long after the last deadline of a run the jobs still queued are abandoned.
constexpr Duration kGrace = 100ms;

void generate(Policy& policy, Recorder& rec) {
  const TimerSlack slack{1us};
  for (std::size_t i = 0; i < rec.size(); ++i) {
    const TimePoint due = rec.scheduled(i);
    if (Clock::now() < due) std::this_thread::sleep_until(due);
    rec.submitted(i, Clock::now());
    policy.submit(rec, i);
  }
}

}  // namespace

TimerSlack::TimerSlack(Duration slack)
    : previous_ns_{prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)} {
  prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(std::chrono::nanoseconds{slack}.count()),
        0, 0, 0);
}

TimerSlack::~TimerSlack() {
  if (previous_ns_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_ns_), 0, 0, 0);
}

RunData run_arrivals(Policy& policy, std::span<const Arrival> arrivals) {
  RunData data;
  RssSampler rss;
  policy.reset_peak();
  // A moment to spare, so that job 0 is not late before the generator starts.
  data.recorder = std::make_unique<Recorder>(Clock::now() + 2ms, arrivals);
  Recorder& rec = *data.recorder;
  generate(policy, rec);

  TimePoint last_deadline = rec.start();
  for (std::size_t i = 0; i < rec.size(); ++i) last_deadline = std::max(last_deadline, rec.deadline(i));
  if (!rec.wait_finished(rec.size(), last_deadline + kGrace)) {
    const std::size_t before = rec.finished();
    policy.abandon();
    data.complete = rec.wait_finished(rec.size(), Clock::now() + 120s);
    data.abandoned = rec.size() - before;  // at most: some were running and complete late
  }
  data.peak_queue_depth = policy.peak_queue_depth();
  data.peak_rss_bytes = rss.peak_bytes();
  return data;
}

void warm_up(Policy& policy, const Distribution& service, std::size_t workers, std::size_t jobs,
             std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<Arrival> arrivals(jobs);
  for (Arrival& a : arrivals) a = {.at = Duration::zero(), .service = service.sample(rng), .budget = 60s};
  Recorder rec{Clock::now(), arrivals};
  for (std::size_t i = 0; i < jobs;) {
    const std::size_t wave_end = std::min(jobs, i + std::max<std::size_t>(workers, 1));
    for (; i < wave_end; ++i) {
      rec.submitted(i, Clock::now());
      policy.submit(rec, i);
    }
    rec.wait_finished(wave_end, Clock::now() + 120s);
  }
}

}  // namespace sandglass::bench

// DaemonMetrics on prometheus-cpp. Families are registered once; each kind's series are cached,
// so after a kind's first jobs, recording an outcome builds no label sets and looks nothing up
// in prometheus-cpp's families (it takes a shared lock to find the kind, and histograms lock
// inside prometheus-cpp).
#include "daemon/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace sandglass::daemon {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// From a queue wait of microseconds to a drain-length budget.
constexpr std::array<double, 20> kSecondsBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,     1,      2.5,   5,      10,    25,   50,    100,  300};

constexpr std::size_t kCauseCount = static_cast<std::size_t>(CancelCause::shutdown) + 1;
// Statuses 100-599 have a slot each; slot 0 is for anything else.
constexpr std::size_t kStatusSlots = 600;

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// The cache slot of an enum value in an array of `N + 1` slots: values outside the enum share
// the last one (their `to_string` is "unknown" for all of them).
template <std::size_t N, typename Enum>
std::size_t slot_of(Enum value) {
  return std::min(static_cast<std::size_t>(value), N);
}

// One series, looked up on first use. Two threads that miss at once both call `Add`, which
// returns the same series for the same labels, so both store the same pointer.
class CounterSlot {
 public:
  template <typename MakeLabels>
  Counter& get(Family<Counter>& family, MakeLabels make_labels) {
    // Acquire pairs with the release store below: who sees the pointer sees the constructed
    // series.
    Counter* counter = counter_.load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &family.Add(make_labels());
      counter_.store(counter, std::memory_order_release);
    }
    return *counter;
  }

 private:
  std::atomic<Counter*> counter_{nullptr};
};

Family<Counter>& counter_family(prometheus::Registry& registry, const char* name,
                                const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Gauge>& gauge_family(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Histogram>& histogram_family(prometheus::Registry& registry, const char* name,
                                    const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

struct DaemonMetrics::Families {
  // The series of one kind. Those labelled by kind only exist from the kind's first job on;
  // the others appear with their first increment.
  struct Kind {
    Kind(Families& f, const std::string& kind)
        : completed_after_cancel{f.completed_after_cancel.Add({{"kind", kind}})},
          work_after_deadline{f.work_after_deadline.Add({{"kind", kind}})},
          after_deadline{f.after_deadline.Add({{"kind", kind}})},
          budget_granted{f.budget_granted.Add({{"kind", kind}}, buckets())},
          queue_wait{f.queue_wait.Add({{"kind", kind}}, buckets())},
          remaining_at_dispatch{f.remaining_at_dispatch.Add({{"kind", kind}}, buckets())},
          run_time{f.run_time.Add({{"kind", kind}}, buckets())} {}

    static Histogram::BucketBoundaries buckets() {
      return {kSecondsBuckets.begin(), kSecondsBuckets.end()};
    }

    std::array<CounterSlot, kPriorityCount + 1> submitted;
    // Indexed by priority and reason (a reason has one state: state_of).
    std::array<std::array<CounterSlot, kReasonCount + 1>, kPriorityCount + 1> jobs;
    std::array<CounterSlot, kReasonCount + 1> rejections;
    std::array<CounterSlot, kCauseCount + 1> cancellations;
    Counter& completed_after_cancel;
    Counter& work_after_deadline;
    Counter& after_deadline;
    CounterSlot overruns;
    CounterSlot retries;
    std::array<CounterSlot, kRetryStopCount + 1> retry_stops;
    Histogram& budget_granted;
    Histogram& queue_wait;
    Histogram& remaining_at_dispatch;
    Histogram& run_time;
  };

  Families()
      : submitted{counter_family(registry, "sandglass_jobs_submitted_total",
                                 "Job requests that reached admission, by kind and priority.")},
        jobs{counter_family(registry, "sandglass_jobs_total",
                            "Jobs by terminal outcome: state and the reason code.")},
        rejections{counter_family(
            registry, "sandglass_rejections_total",
            "Jobs rejected at admission or shed from the queue, by reason code.")},
        cancellations{counter_family(registry, "sandglass_cancellations_total",
                                     "Cancelled jobs, by the cause of the cancellation.")},
        completed_after_cancel{counter_family(
            registry, "sandglass_completed_after_cancel_total",
            "Jobs that completed although a cancellation had arrived.")},
        work_after_deadline{counter_family(
            registry, "sandglass_work_after_deadline_seconds_total",
            "Handler run time spent after the job's deadline had passed.")},
        after_deadline{counter_family(
            registry, "sandglass_jobs_after_deadline_total",
            "Started jobs whose handler returned after the job's deadline.")},
        overruns{counter_family(
            registry, "sandglass_overruns_total",
            "Jobs reported still running overrun_after past their deadline (workers held).")},
        retries{counter_family(registry, "sandglass_retries_total",
                               "Attempts run again after a failed one (JobSpec::retry), by kind.")},
        retry_stops{counter_family(
            registry, "sandglass_retry_stops_total",
            "Jobs whose last attempt failed and that were not tried again, by why: "
            "attempts_exhausted, retry_skipped_budget, retry_budget_exhausted, committed, "
            "cancelled, rejected, shutting_down.")},
        budget_granted{histogram_family(registry, "sandglass_budget_granted_seconds",
                                        "Time budget granted to admitted jobs.")},
        queue_wait{histogram_family(
            registry, "sandglass_queue_wait_seconds",
            "Time admitted jobs waited in the queue until they started or left it.")},
        remaining_at_dispatch{histogram_family(
            registry, "sandglass_remaining_at_dispatch_seconds",
            "Time left until the deadline when a job started (zero if already past).")},
        run_time{histogram_family(registry, "sandglass_run_time_seconds",
                                  "Handler run time of started jobs.")},
        http_responses{counter_family(registry, "sandglass_http_responses_total",
                                      "HTTP responses sent, by status code.")},
        running{gauge_family(registry, "sandglass_running_jobs", "Jobs running now.")
                    .Add({})},
        workers{gauge_family(registry, "sandglass_workers", "Worker threads.").Add({})},
        draining{gauge_family(registry, "sandglass_draining",
                              "1 while the daemon drains for shutdown, else 0.")
                     .Add({})},
        peak_depth{gauge_family(registry, "sandglass_queue_peak_depth",
                                "Most jobs queued at once since start.")
                       .Add({})},
        overrunning{gauge_family(registry, "sandglass_workers_overrunning",
                                 "Workers whose job is overrunning its deadline now.")
                        .Add({})},
        standing_queue{gauge_family(registry, "sandglass_admission_standing_queue",
                                    "1 while the standing-queue rule holds (every job started "
                                    "for an interval had waited longer than the target), else 0.")
                           .Add({})},
        queue_delay_target{gauge_family(registry, "sandglass_admission_queue_delay_target_seconds",
                                        "The standing-queue rule's target delay now.")
                               .Add({})},
        prediction_error{gauge_family(registry, "sandglass_admission_prediction_error_seconds",
                                      "The tail (p99, at least 0) of the runtime's own prediction "
                                      "error, of a job's start, run time or finish; admission adds "
                                      "the finish's to every predicted finish.")},
        estimate_seconds{gauge_family(
            registry, "sandglass_estimate_seconds",
            "Run-time estimate per estimate key: stat mean predicts the work queued ahead, "
            "stat tail bounds a job's own run.")},
        estimate_samples{gauge_family(registry, "sandglass_estimate_samples",
                                      "Runs recorded per estimate key since start.")} {
    Family<Gauge>& depth =
        gauge_family(registry, "sandglass_queue_depth", "Jobs queued now, by priority class.");
    for (std::size_t p = 0; p < kPriorityCount; ++p) {
      queue_depth[p] = &depth.Add({{"priority", std::string{to_string(static_cast<Priority>(p))}}});
    }
  }

  Kind& kind(std::string_view name) {
    {
      std::shared_lock lock{kinds_mu};
      if (auto it = kinds.find(name); it != kinds.end()) return *it->second;
    }
    std::unique_lock lock{kinds_mu};
    auto [it, inserted] = kinds.try_emplace(std::string{name});
    if (inserted) it->second = std::make_unique<Kind>(*this, it->first);
    return *it->second;
  }

  prometheus::Registry registry;  // first: the families below live in it
  Family<Counter>& submitted;
  Family<Counter>& jobs;
  Family<Counter>& rejections;
  Family<Counter>& cancellations;
  Family<Counter>& completed_after_cancel;
  Family<Counter>& work_after_deadline;
  Family<Counter>& after_deadline;
  Family<Counter>& overruns;
  Family<Counter>& retries;
  Family<Counter>& retry_stops;
  Family<Histogram>& budget_granted;
  Family<Histogram>& queue_wait;
  Family<Histogram>& remaining_at_dispatch;
  Family<Histogram>& run_time;
  Family<Counter>& http_responses;
  std::array<CounterSlot, kStatusSlots> http_by_status;
  std::array<Gauge*, kPriorityCount> queue_depth{};
  Gauge& running;
  Gauge& workers;
  Gauge& draining;
  Gauge& peak_depth;
  Gauge& overrunning;
  Gauge& standing_queue;
  Gauge& queue_delay_target;
  Family<Gauge>& prediction_error;
  Family<Gauge>& estimate_seconds;
  Family<Gauge>& estimate_samples;

  std::shared_mutex kinds_mu;
  std::map<std::string, std::unique_ptr<Kind>, std::less<>> kinds;  // guarded by kinds_mu
};

DaemonMetrics::DaemonMetrics() : families_{std::make_unique<Families>()} {}
DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::job_submitted(std::string_view kind, Priority priority) {
  Families& f = *families_;
  Families::Kind& k = f.kind(kind);
  k.submitted[slot_of<kPriorityCount>(priority)]
      .get(f.submitted,
           [&] {
             return Labels{{"kind", std::string{kind}},
                           {"priority", std::string{to_string(priority)}}};
           })
      .Increment();
}

void DaemonMetrics::job_finished(const Outcome& outcome, Priority priority) {
  Families& f = *families_;
  Families::Kind& k = f.kind(outcome.kind);
  // Grouped by the one table of states (outcome.hpp), as the drain summary and the HTTP
  // status table group them.
  const State state = state_of(outcome.reason);
  const std::string_view reason = to_string(outcome.reason);

  k.jobs[slot_of<kPriorityCount>(priority)][slot_of<kReasonCount>(outcome.reason)]
      .get(f.jobs,
           [&] {
             return Labels{{"kind", outcome.kind},
                           {"priority", std::string{to_string(priority)}},
                           {"state", std::string{to_string(state)}},
                           {"reason", std::string{reason}}};
           })
      .Increment();
  if (state == State::rejected) {
    k.rejections[slot_of<kReasonCount>(outcome.reason)]
        .get(f.rejections,
             [&] { return Labels{{"kind", outcome.kind}, {"reason", std::string{reason}}}; })
        .Increment();
  }
  if (state == State::cancelled) {
    k.cancellations[slot_of<kCauseCount>(outcome.cause)]
        .get(f.cancellations,
             [&] {
               return Labels{{"kind", outcome.kind},
                             {"cause", std::string{to_string(outcome.cause)}}};
             })
        .Increment();
  }
  if (outcome.reason == Reason::completed_after_cancel) k.completed_after_cancel.Increment();
  job_retries(outcome);

  const Timings& t = outcome.timings;
  // A shed job was admitted and waited before a job of a higher class pushed it out.
  if (state != State::rejected || outcome.reason == Reason::shed) {
    k.budget_granted.Observe(seconds(t.budget));
    k.queue_wait.Observe(seconds(t.queue_wait));
  }
  if (outcome.started()) {
    k.remaining_at_dispatch.Observe(seconds(std::max(t.remaining_at_start, Duration::zero())));
    k.run_time.Observe(seconds(t.run_time));
    if (t.remaining_at_end < Duration::zero()) {
      // min(run_time, -remaining_at_end), without negating Duration::min().
      const Duration late = t.remaining_at_end <= -t.run_time ? t.run_time : -t.remaining_at_end;
      k.work_after_deadline.Increment(seconds(late));
      k.after_deadline.Increment();
    }
  }
}

void DaemonMetrics::job_retries(const Outcome& outcome) {
  Families& f = *families_;
  Families::Kind& k = f.kind(outcome.kind);
  if (outcome.attempts.size() > 1) {
    k.retries.get(f.retries, [&] { return Labels{{"kind", outcome.kind}}; })
        .Increment(static_cast<double>(outcome.attempts.size() - 1));
  }
  if (outcome.retry_stop != RetryStop::none) {
    k.retry_stops[slot_of<kRetryStopCount>(outcome.retry_stop)]
        .get(f.retry_stops,
             [&] {
               return Labels{{"kind", outcome.kind},
                             {"reason", std::string{to_string(outcome.retry_stop)}}};
             })
        .Increment();
  }
}

void DaemonMetrics::job_overrunning(std::string_view kind) {
  Families& f = *families_;
  f.kind(kind).overruns.get(f.overruns, [&] { return Labels{{"kind", std::string{kind}}}; }).Increment();
}

void DaemonMetrics::http_response(unsigned status) {
  Families& f = *families_;
  const bool known = status >= 100 && status < kStatusSlots;
  f.http_by_status[known ? status : 0]
      .get(f.http_responses,
           [&] { return Labels{{"code", known ? std::to_string(status) : std::string{"other"}}}; })
      .Increment();
}

std::string DaemonMetrics::render(const RuntimeStats& stats, std::size_t workers, bool draining,
                                  const std::vector<EstimateSnapshot>& estimates) {
  Families& f = *families_;
  for (std::size_t p = 0; p < kPriorityCount; ++p) {
    f.queue_depth[p]->Set(static_cast<double>(stats.queued_by_priority[p]));
  }
  f.running.Set(static_cast<double>(stats.running));
  f.workers.Set(static_cast<double>(workers));
  f.draining.Set(draining ? 1 : 0);
  f.peak_depth.Set(static_cast<double>(stats.peak_queued));
  f.overrunning.Set(static_cast<double>(stats.overrunning));
  f.standing_queue.Set(stats.standing_queue ? 1.0 : 0.0);
  f.queue_delay_target.Set(std::chrono::duration<double>(stats.queue_delay_target).count());
  f.prediction_error.Add({{"of", "start"}}).Set(std::chrono::duration<double>(stats.start_error_tail).count());
  f.prediction_error.Add({{"of", "run"}}).Set(std::chrono::duration<double>(stats.run_error_tail).count());
  f.prediction_error.Add({{"of", "finish"}}).Set(std::chrono::duration<double>(stats.prediction_margin).count());
  for (const EstimateSnapshot& e : estimates) {
    const auto seconds = [](Duration d) { return std::chrono::duration<double>(d).count(); };
    f.estimate_seconds.Add({{"kind", e.kind}, {"key", e.key}, {"stat", "mean"}}).Set(seconds(e.mean));
    f.estimate_seconds.Add({{"kind", e.kind}, {"key", e.key}, {"stat", "tail"}}).Set(seconds(e.tail));
    f.estimate_samples.Add({{"kind", e.kind}, {"key", e.key}}).Set(static_cast<double>(e.samples));
  }
  return prometheus::TextSerializer{}.Serialize(f.registry.Collect());
}

}  // namespace sandglass::daemon

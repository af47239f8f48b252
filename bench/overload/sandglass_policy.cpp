// sandglass: the real Runtime. Each job gets an absolute deadline (its scheduled arrival plus
// its budget), so time the generator lost counts against it, as it would for a real caller.
#include "policy.hpp"

#include <sandglass/outcome.hpp>
#include <sandglass/runtime.hpp>

namespace sandglass::bench {
namespace {

using namespace std::chrono_literals;

class SandglassPolicy final : public Policy {
 public:
  explicit SandglassPolicy(const PolicyOptions& options)
      : body_{options.body},
        hints_{options.hints},
        seed_{options.seed},
        runtime_{{.workers = options.workers,
                  .capacity = options.capacity,
                  .drop_if_cannot_finish = options.drop_if_cannot_finish,
                  .estimate_quantile = options.estimate_quantile,
                  .estimate_max_age = options.estimate_max_age}} {}
  ~SandglassPolicy() override { runtime_.shutdown(0s); }

  void submit(Recorder& rec, std::size_t i) override {
    const JobHandle job = runtime_.submit(
        {.kind = "bench",
         .deadline = Deadline::at(rec.deadline(i)),
         .expected = hints_.of(rec.arrival(i).service, seed_, i)},
        [this, service = rec.arrival(i).service](JobContext& ctx) {
          note_left();
          run_sandglass_body(body_, service, ctx);
        },
        [this, &rec, i](const Outcome& o) { record(rec, i, o); });
    // Counted after admission; a job that already started made the count dip below the
    // truth for a moment, so the peak errs low by at most the jobs started meanwhile.
    if (!rejected_at_admission(job)) note_queued();
  }

  void abandon() override { runtime_.shutdown(0s); }

 private:
  void record(Recorder& rec, std::size_t i, const Outcome& o) noexcept {
    const TimePoint now = Clock::now();
    switch (o.state) {
      case State::completed:
        rec.completed(i, now, o.timings.run_time);
        return;
      case State::failed:
        rec.failed(i, now, o.timings.run_time);
        return;
      case State::rejected:
        if (o.reason == Reason::shed) note_left();  // it was queued; the others never were
        rec.rejected(i, now, o.reason);
        return;
      case State::expired:
        note_left();
        rec.expired(i, now, o.reason);
        return;
      case State::cancelled:
        if (o.reason == Reason::cancelled_while_running) {
          rec.cancelled(i, now, o.timings.run_time);
        } else {
          note_left();  // cancelled in the queue: only by abandon()'s shutdown
          rec.expired(i, now);
        }
        return;
    }
  }

  static bool rejected_at_admission(const JobHandle& job) {
    if (!job.done()) return false;
    const auto o = job.outcome();
    return o->state == State::rejected && o->reason != Reason::shed;
  }

  const Body body_;
  const Hints hints_;
  const std::uint64_t seed_;
  Runtime runtime_;  // last: its threads use body_
};

}  // namespace

std::unique_ptr<Policy> make_sandglass_policy(const PolicyOptions& options) {
  return std::make_unique<SandglassPolicy>(options);
}

}  // namespace sandglass::bench

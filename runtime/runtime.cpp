#include <sandglass/runtime.hpp>

#include "runtime/runtime_core.hpp"

#include <mutex>
#include <stdexcept>

namespace sandglass {

std::string RuntimeOptions::validate() const {
  if (workers == 0) return "workers: must be at least 1";
  if (capacity == 0) return "capacity: must be at least 1";
  if (std::string e = budget.validate(); !e.empty()) return "budget." + e;
  for (const auto& [kind, limit] : kind_limits) {
    if (limit == 0) return "kind_limits." + kind + ": must be at least 1";
  }
  if (!(estimate_quantile > 0.0 && estimate_quantile <= 1.0)) {
    return "estimate_quantile: must be in (0, 1]";
  }
  if (estimate_window == 0) return "estimate_window: must be at least 1";
  if (estimate_max_age < Duration::zero()) return "estimate_max_age: must not be negative";
  if (!(estimate_age_in_runs >= 0)) return "estimate_age_in_runs: must not be negative";
  if (overrun_after <= Duration::zero()) return "overrun_after: must be positive";
  if (tiny_job < Duration::zero()) return "tiny_job: must not be negative";
  if (queue_delay_target < Duration::zero()) return "queue_delay_target: must not be negative";
  if (std::string e = retry_budget.validate(); !e.empty()) return "retry_budget." + e;
  return {};
}

Runtime::Runtime(RuntimeOptions options) {
  if (std::string error = options.validate(); !error.empty()) {
    throw std::invalid_argument{"RuntimeOptions." + error};
  }
  core_ = std::make_unique<detail::RuntimeCore>(std::move(options));
  core_->start_threads();
}

Runtime::~Runtime() { core_->shutdown_until(Deadline::after(Duration::zero())); }

JobHandle Runtime::submit(JobSpec spec, Handler handler) {
  return core_->submit(std::move(spec), std::move(handler), {});
}

JobHandle Runtime::submit(JobSpec spec, Handler handler, OutcomeCallback on_outcome) {
  return core_->submit(std::move(spec), std::move(handler), std::move(on_outcome));
}

JobHandle Runtime::submit(JobSpec spec, AwaitableHandler handler, OutcomeCallback on_outcome) {
  return core_->submit(std::move(spec), {}, std::move(on_outcome),
                       std::make_unique<detail::AwaitableRun>(std::move(handler)));
}

void Runtime::shutdown_until(Deadline drain_deadline) { core_->shutdown_until(drain_deadline); }
void Runtime::stop_admitting() { core_->stop_admitting(); }
void Runtime::end_drain() { core_->end_drain(); }

RuntimeStats Runtime::stats() const { return core_->stats(); }
std::vector<Overrun> Runtime::overruns() const { return core_->overruns(); }
std::vector<EstimateSnapshot> Runtime::estimates() const { return core_->estimates(); }
void Runtime::record_run(const JobSpec& spec, Duration run_time) {
  core_->record_outside_run(spec, run_time);
}
RunEstimate Runtime::estimate(const JobSpec& spec) const { return core_->estimate(spec); }

const RuntimeOptions& Runtime::options() const noexcept { return core_->options(); }

JobHandle::JobHandle(detail::JobRef&& job) noexcept : job_{job.release()} {}

JobHandle::JobHandle(const JobHandle& other) noexcept : job_{other.job_} {
  if (job_ != nullptr) job_->add_ref();
}

JobHandle& JobHandle::operator=(const JobHandle& other) noexcept {
  JobHandle copy{other};
  std::swap(job_, copy.job_);
  return *this;
}

JobHandle& JobHandle::operator=(JobHandle&& other) noexcept {
  JobHandle taken{std::move(other)};
  std::swap(job_, taken.job_);
  return *this;
}

JobHandle::~JobHandle() {
  const detail::JobRef dropped = detail::JobRef::adopt(job_);  // drops the reference
}

JobId JobHandle::id() const noexcept { return job_ ? job_->id : 0; }

bool JobHandle::cancel() const {
  // A finished job no longer touches its runtime, which may be gone.
  return job_ && detail::RuntimeCore::cancel_from_outside(*job_, CancelCause::caller);
}

namespace detail {

void PendingCancel::cancel() {
  JobHandle job;
  {
    std::lock_guard lock{mu_};
    if (!job_) {
      requested_ = true;  // attach() applies it
      return;
    }
    job = job_;
  }
  job.cancel();
}

void PendingCancel::attach(const JobHandle& job) {
  {
    std::lock_guard lock{mu_};
    job_ = job;
    if (!requested_) return;
  }
  job.cancel();
}

}  // namespace detail

Outcome JobHandle::wait() const {
  if (!job_) throw std::logic_error{"JobHandle::wait: the handle refers to no job"};
  return job_->wait();
}

std::optional<Outcome> JobHandle::wait_for(Duration timeout) const {
  return wait_until(Deadline::after(timeout));
}

std::optional<Outcome> JobHandle::wait_until(Deadline deadline) const {
  if (!job_) return std::nullopt;
  return job_->wait_until(deadline);
}

std::optional<Outcome> JobHandle::outcome() const {
  return job_ ? job_->outcome() : std::nullopt;
}

bool JobHandle::done() const noexcept { return job_ && job_->done(); }
bool JobHandle::started() const noexcept {
  return job_ && job_->started_.load(std::memory_order_relaxed);
}

JobProgress JobHandle::progress() const noexcept {
  if (!job_) return {};
  JobProgress p{.budget = job_->budget, .enqueued_at = job_->enqueued_at,
                .deadline = job_->deadline};
  // Pairs with the release store in RuntimeCore::mark_running: started_at is written before it.
  if (job_->started_.load(std::memory_order_acquire)) {
    p.started_at = job_->started_at;
    p.worker = job_->worker;
  }
  p.scheduled = job_->waiting_.load(std::memory_order_relaxed);
  return p;
}

}  // namespace sandglass

#include "workers/job.hpp"

#include "core/install_once.hpp"
#include "workers/awaitable_runner.hpp"
#include "workers/callback_scope.hpp"
#include "workers/job_pool.hpp"

#include <thread>

namespace sandglass::detail {

static_assert(alignof(Job) <= alignof(std::max_align_t), "pool blocks are aligned for max_align_t");

static_assert(sizeof(JobWithCallback) == sizeof(Job) + sizeof(OutcomeCallback),
              "the callback sits right after the record");

JobRef Job::make(OutcomeCallback&& on_outcome) {
  if (!on_outcome) return JobRef::adopt(::new (JobPool::allocate(JobPool::Size::plain)) Job);
  // std::function's move constructor does not throw; the block is the pool's.
  void* block = JobPool::allocate(JobPool::Size::with_callback);
  return JobRef::adopt(::new (block) JobWithCallback{std::move(on_outcome)});
}

void Job::destroy(CancelState& state) noexcept {
  Job* const job = static_cast<Job*>(&state);
  if (job->has_callback_) {
    auto* const with = static_cast<JobWithCallback*>(job);
    with->~JobWithCallback();
    JobPool::deallocate(with, JobPool::Size::with_callback);
  } else {
    job->~Job();
    JobPool::deallocate(job, JobPool::Size::plain);
  }
}

Job::~Job() { delete extras_.load(std::memory_order_acquire); }

Job::Extras& Job::extras() {
  // Seq_cst: a waiter's installation comes before its read of done_ (see Extras::waiters).
  return install_once(extras_);
}

void Job::publish(Outcome&& outcome, bool kept) {
  // Read while unfinished (see `origin`); the runtime itself outlives this call.
  RuntimeCore* const runtime = core();
  handler = nullptr;     // release what the handler captured as soon as the job is over
  // Made at submit, if at all; a waiter may make them meanwhile (then with no part of submit's).
  Extras* extras = extras_if_made();
  // The parent may outlive the runtime; blocks while its callback runs.
  if (extras != nullptr) extras->parent_link.reset();
  // Without a reader the callback gets the caller's outcome as it is.
  if (kept) {
    if (extras == nullptr) extras = &this->extras();
    extras->outcome.emplace(std::move(outcome));
  }
  // Also the release that publishes the outcome to whoever acquires done_.
  done_.store(true, std::memory_order_seq_cst);
  if (Extras* e = extras_.load(std::memory_order_seq_cst)) {
    if (Waiters* w = e->waiters.load(std::memory_order_seq_cst)) {
      { std::lock_guard lock{w->mu}; }  // a waiter between its check and its sleep holds mu
      w->published.notify_all();
    }
  }
  // Pairs with the seq_cst increment in pin_core(). Pins last a few instructions.
  while (pins_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  if (OutcomeCallback* const own = on_outcome(); own != nullptr && *own) {
    OutcomeCallback callback = std::move(*own);
    const CallbackScope scope{runtime};
    callback(kept ? *extras->outcome : outcome);
  }
}

RuntimeCore* Job::pin_core() noexcept {
  if (done()) return nullptr;
  // Pairs with the seq_cst store of done_ and load of pins_ in publish().
  pins_.fetch_add(1, std::memory_order_seq_cst);
  if (done_.load(std::memory_order_seq_cst)) {
    pins_.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  return core();
}

// Release: what the pinner did (registering with the runtime) is visible to publish(), which
// reads pins_ afterwards.
void Job::unpin_core() noexcept { pins_.fetch_sub(1, std::memory_order_release); }

Job::Waiters& Job::waiters() { return install_once(extras().waiters); }

Outcome Job::wait() { return *wait_until(Deadline::never()); }

std::optional<Outcome> Job::wait_until(Deadline until) {
  if (!done()) {
    Waiters& w = waiters();
    std::unique_lock lock{w.mu};
    auto published = [&] { return done_.load(std::memory_order_seq_cst); };
    if (until.is_never()) {
      w.published.wait(lock, published);
    } else if (!w.published.wait_until(lock, until.time_point(), published)) {
      return std::nullopt;
    }
  }
  return published_outcome();
}

std::optional<Outcome> Job::outcome() const {
  if (!done()) return std::nullopt;
  return published_outcome();
}

}  // namespace sandglass::detail

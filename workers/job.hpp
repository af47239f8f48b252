// job.hpp (private) — `Job`, everything the runtime keeps about one submitted job, in one
// allocation: its queue links, handler, cancellation state, timings and outcome.
//
// Thread safety: fields marked "guarded by the runtime" are read and written only under the
// runtime's mutex. The outcome is published once (`publish`) and then read by any thread.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline_queue.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/outcome.hpp>

#include <boost/intrusive/set_hook.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace sandglass::detail {

class RuntimeCore;
struct KindState;

struct Job : QueueItem {
  enum class Phase : std::uint8_t { pending, queued, running, finished };

  // User-provided, so that making a job does not zero-fill all of it first: a job is made on
  // the submitting thread in memory a worker freed last, and every cache line written here
  // has to travel between cores. State needed only once a job runs or ends lives in
  // std::optional and is not touched until then.
  Job() noexcept {}

  JobId id = 0;
  std::string kind;
  JobHandler handler;
  OutcomeCallback on_outcome;
  std::optional<CancelState> cancel_state;  // the job's token; made when it starts
  Duration budget{};
  TimePoint enqueued_at{};
  TimePoint started_at{};
  RuntimeCore* core = nullptr;  // outlives every unfinished job (the runtime's destructor
                                // waits for all outcomes); touched only while unfinished

  // Guarded by the runtime.
  Phase phase = Phase::pending;
  bool deadline_signalled = false;  // the timer cancelled it with cause `deadline`
  KindState* kind_state = nullptr;
  // The runtime's own reference while the job is queued or running: lets the queue and the
  // running set link it by address, and the timer take a reference to what it cancels.
  std::shared_ptr<Job> self;
  boost::intrusive::set_member_hook<> running_hook;

  // Made when the job starts (under the runtime's lock, before anyone can cancel it).
  void make_cancel_state() { cancel_state.emplace(); }
  // Cancels a started job. True for the first cancellation.
  bool cancel(CancelCause cause) noexcept { return cancel_state->cancel(cause); }
  CancelToken token() { return CancelAccess::token({self, &*cancel_state}); }  // while running

  // Stores the outcome, wakes waiters, then runs `on_outcome`. Call exactly once, holding no
  // lock of the runtime.
  void publish(Outcome&& outcome);
  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  // Blocks until published.
  Outcome wait();
  std::optional<Outcome> wait_until(Deadline until);
  std::optional<Outcome> outcome() const;

  CancelRegistration parent_link;  // reset when the outcome is published

 private:
  // Publication without a lock when nobody waits: the outcome is written before done_ is set
  // and never changes after. Waiters announce themselves in waiters_ and sleep on mu_/published_;
  // publish() locks and notifies only if it sees a waiter.
  mutable std::mutex mu_;
  std::condition_variable published_;
  std::optional<Outcome> outcome_;  // written once, before done_
  std::atomic<bool> done_{false};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace sandglass::detail

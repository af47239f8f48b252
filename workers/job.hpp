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

struct Job : QueueItem, std::enable_shared_from_this<Job> {
  enum class Phase : std::uint8_t { pending, queued, running, finished };

  JobId id = 0;
  std::string kind;
  JobHandler handler;
  OutcomeCallback on_outcome;
  CancelState cancel;  // the job's own token; `token()` shares this allocation
  Duration budget{};
  TimePoint enqueued_at{};
  TimePoint started_at{};
  RuntimeCore* core = nullptr;  // outlives every unfinished job (the runtime's destructor
                                // waits for all outcomes); touched only while unfinished

  // Guarded by the runtime.
  Phase phase = Phase::pending;
  bool deadline_signalled = false;  // the timer cancelled it with cause `deadline`
  KindState* kind_state = nullptr;
  std::shared_ptr<Job> queued_ref;  // keeps the job alive while only the queue links it
  boost::intrusive::set_member_hook<> running_hook;

  CancelToken token() { return CancelAccess::token({shared_from_this(), &cancel}); }

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
  Outcome outcome_;
  std::atomic<bool> done_{false};
  std::atomic<std::uint32_t> waiters_{0};
};

}  // namespace sandglass::detail

// awaitable_runner.hpp (private) — starts an awaitable job's coroutine on its executor and
// bridges the job's cancellation into it (see awaitable_job.hpp for what users see).
//
// Thread safety: `AwaitableRun` belongs to one job; after `launch_awaitable` its members are
// touched only on the job's strand (the coroutine, the emits, the completion), except `bridge`,
// which is set before the coroutine can end and reset on the strand, and `launch` (atomic) and
// `unstarted`, set before the start is posted.
#pragma once

#include <sandglass/awaitable_job.hpp>
#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/job_context.hpp>

#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace sandglass::detail {

struct Job;
class JobRef;
class JobSource;

// The part of a job that only awaitable jobs have (allocated with the job when submitted).
struct AwaitableRun {
  explicit AwaitableRun(AwaitableHandler h) : handler{std::move(h)} {}

  // Who decides the job's fate first: its strand starting the coroutine, or a cancellation
  // (its deadline, its caller, a shutdown) that comes before the executor ran the start. An
  // executor that never runs the start (nobody runs it, or its threads returned before there
  // was work) then cannot keep the job, its run slot, or a shutdown waiting.
  enum class Launch : std::uint8_t { pending, started, abandoned };
  std::atomic<Launch> launch{Launch::pending};
  CancelRegistration unstarted;             // the job's token -> end it unstarted

  AwaitableHandler handler;
  std::optional<JobContext> ctx;            // made at launch; outlives the coroutine
  boost::asio::cancellation_signal signal;  // bound to the co_spawn; emitted on the strand
  CancelRegistration bridge;                // the job's token -> signal
  bool done = false;                        // the coroutine finished; on the strand only
};

// Starts `job` (running, with a run slot, `job->awaitable` set) on a strand of its executor and
// returns at once. When the coroutine has finished, on that strand, the outcome goes to
// `source.finish_detached`. A job cancelled before its executor ran the start never starts:
// its outcome goes to `source.finish_detached` at once, from the cancelling thread (expired,
// expired_in_queue, for its deadline; else cancelled, cancelled_in_queue, with the cause).
// `policy` must outlive the job.
void launch_awaitable(const JobRef& job, JobSource& source, const BudgetPolicy& policy);

}  // namespace sandglass::detail

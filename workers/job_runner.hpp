// job_runner.hpp (private) — runs one job's handler and turns what happened into an outcome.
#pragma once

#include <sandglass/budget_policy.hpp>
#include <sandglass/outcome.hpp>

#include "workers/job.hpp"

#include <exception>

namespace sandglass::detail {

// Runs `job.handler` on this thread with a fresh JobContext. Never throws: a handler's
// exception becomes a failed (or, if the job was cancelled, a cancelled) outcome.
// `job.started_at` must be set; the outcome's timings are measured against it.
Outcome run_job(Job& job, const BudgetPolicy& policy) noexcept;

// The two halves of an outcome, for handlers that do not run on the worker (awaitable ones):
// what is known when the job starts, and what happened once the handler has finished (`error`
// is what it threw, or null). `settle_outcome` closes the job's cancellation state and reads
// the clock for the end of the run.
Outcome begin_outcome(const Job& job);
void settle_outcome(Outcome& o, Job& job, JobContext& ctx, std::exception_ptr error) noexcept;

}  // namespace sandglass::detail

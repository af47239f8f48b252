// job_runner.hpp (private) — runs one job's handler and turns what happened into an outcome.
#pragma once

#include <sandglass/budget_policy.hpp>
#include <sandglass/outcome.hpp>

#include "workers/job.hpp"

namespace sandglass::detail {

// Runs `job.handler` on this thread with a fresh JobContext. Never throws: a handler's
// exception becomes a failed (or, if the job was cancelled, a cancelled) outcome.
// `job.started_at` must be set; the outcome's timings are measured against it.
Outcome run_job(Job& job, const BudgetPolicy& policy) noexcept;

}  // namespace sandglass::detail

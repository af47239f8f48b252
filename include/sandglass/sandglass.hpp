// sandglass.hpp — the whole public API of Sandglass, a deadline-aware job queue and worker
// runtime. Include the single headers instead to keep compile times down.
#pragma once

#include <sandglass/asio_cancellation.hpp>
#include <sandglass/budget_policy.hpp>
#include <sandglass/cancel.hpp>
#include <sandglass/circuit_breaker.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/deadline_queue.hpp>
#include <sandglass/job_context.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/move_only_function.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/overrun.hpp>
#include <sandglass/reason.hpp>
#include <sandglass/retry_policy.hpp>
#include <sandglass/runtime.hpp>
#include <sandglass/service_time_estimator.hpp>
#include <sandglass/wire_budget.hpp>

// job_body.hpp — what a bench job does for its service time: `sleep` (I/O-like: the worker
// waits) or `spin` (CPU work: the worker burns that much of its own thread's CPU time).
//
//   run_plain_body(Body::sleep, 2ms);          // the baselines: nothing can stop it
//   run_sandglass_body(Body::spin, 2ms, ctx);   // Sandglass: stops at cancellation
//
// `spin` counts the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time, so a job needs
// the same work however many threads share the cores. It reads that clock about every 10 us and
// checkpoints as often (far more often than the required once per 100 us).
//
// Thread safety: free functions; each call uses only its own thread.
#pragma once

#include <sandglass/deadline.hpp>
#include <sandglass/job_context.hpp>

#include <optional>
#include <string_view>

namespace sandglass::bench {

enum class Body { sleep, spin };

std::optional<Body> body_from_string(std::string_view name) noexcept;
std::string_view to_string(Body body) noexcept;

// Sleeps or spins for `service`; returns when done. Blocks.
void run_plain_body(Body body, Duration service);
// The same inside a Sandglass handler: the sleep is `ctx.sleep_for` (a cancellation wakes it),
// the spin checkpoints. Throws `Cancelled` when the job is cancelled. Blocks.
void run_sandglass_body(Body body, Duration service, JobContext& ctx);

}  // namespace sandglass::bench

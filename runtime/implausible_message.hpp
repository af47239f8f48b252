// implausible_message.hpp (private) — the text of a deadline_implausible rejection: the
// prediction against the deadline, e.g.
//
//   predicted finish 1.2s after submission (start in 900ms + estimate 300ms for sleep:slow)
//   > deadline in 200ms
//   predicted finish 30ms after submission (start in 18ms + estimate 12ms for sleep, from its
//   expected 10ms) > deadline in 20ms
//
// A rejection is answered inside `submit`, so its text is built with integer arithmetic into
// one string (no printf, one allocation).
//
// Thread safety: pure functions.
#pragma once

#include <sandglass/deadline.hpp>

#include <string>
#include <string_view>

namespace sandglass::detail {

// Appends `d` to `out` with three significant digits in the largest unit that is at least 1
// ("1.17s", "30ms", "250us", "0.5us"; whole units from 1000 on: "1200s"), rounded half up;
// negative durations as 0.
void append_duration(std::string& out, Duration d);

// The error of a deadline_implausible rejection at `now`: a job predicted to start at `start`
// with run-time `estimate` (of estimate key `key`) against `deadline`. `expected`: the job's
// own expected run time the estimate was scaled from (JobSpec::expected); zero when the
// estimate is the key's, from its recent runs.
std::string implausible_message(TimePoint start, TimePoint now, Duration estimate,
                                Deadline deadline, std::string_view key,
                                Duration expected = Duration::zero());

// The error of a rejection by the standing-queue rule (queue_full, Admission::beyond_target):
// a job predicted to start at `start` against the target delay `target`, e.g.
//   standing queue: predicted start in 45ms > target delay 4ms
std::string standing_queue_message(TimePoint start, TimePoint now, Duration target);

// How long after `now` the same job would fit once the work predicted ahead of it has
// drained: its predicted finish less its deadline; for a job refused for a queued job's
// promise (it fits its own deadline), its predicted start. Zero if it fits now.
Duration fits_after(TimePoint start, TimePoint now, Duration estimate, Deadline deadline);

}  // namespace sandglass::detail

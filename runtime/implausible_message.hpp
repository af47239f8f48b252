// implausible_message.hpp (private) — the text of a deadline_implausible rejection: the
// prediction against the deadline, e.g.
//
//   predicted finish 1.2s after submission (start in 900ms + estimate 300ms for sleep:slow)
//   > deadline in 200ms
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
// with run-time `estimate` (of estimate key `key`) against `deadline`.
std::string implausible_message(TimePoint start, TimePoint now, Duration estimate,
                                Deadline deadline, std::string_view key);

}  // namespace sandglass::detail

// standing_refusal.hpp (private) — the cluster's standing-queue refusal in a lone daemon's words.
// sandglass_admit (migrations/functions.sql, "Admission and intake") refuses a job by the
// standing-queue rule with the verdict "standing_queue START_US TARGET_US": its predicted start
// and the target delay, in microseconds. The answer is the lone daemon's: reason queue_full,
// the text of standing_queue_message, and Retry-After once the job would start within the target.
//
//   if (auto s = standing_refusal(verdict)) respond(...s->error..., s->retry_after);
//
// Thread safety: pure function.
#pragma once

#include <sandglass/deadline.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace sandglass::daemon::cluster {

struct StandingRefusal {
  std::string error;      // "standing queue: predicted start in 45ms > target delay 4ms"
  Duration retry_after;   // the predicted start less the target
};

// The refusal `verdict` says; none when it is not the standing-queue rule's.
std::optional<StandingRefusal> standing_refusal(std::string_view verdict);

}  // namespace sandglass::daemon::cluster

// job_spec.hpp — `JobSpec`, what a submitter says about a job, and `Priority`, its class.
//
//   sandglass::JobSpec spec{.kind = "resize", .priority = sandglass::Priority::high,
//                           .budget = 800ms};
//
// Time rules: `budget` is relative (from submission), `deadline` absolute; when both are given
// the earlier wins. With neither, the runtime's default budget applies; a budget above the
// maximum is clamped (see `BudgetPolicy`).
//
// Thread safety: a value type.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandglass {

// Priority classes, highest first. The queue serves a higher class before a lower one and,
// within a class, the earliest deadline first.
enum class Priority : std::uint8_t { critical, high, normal, sheddable };

inline constexpr std::size_t kPriorityCount = 4;

std::string_view to_string(Priority priority) noexcept;
std::optional<Priority> priority_from_string(std::string_view name) noexcept;

using JobId = std::uint64_t;

struct JobSpec {
  std::string kind;                      // names the work; service-time estimates are per kind
  Priority priority = Priority::normal;
  std::optional<Duration> budget;        // relative time budget
  std::optional<Deadline> deadline;      // absolute deadline
  CancelToken parent;                    // cancelling it cancels the job (cause `upstream`)
  std::string idempotency_key;           // not interpreted by the runtime; for sources that
                                         // recognise retried requests (the daemon)
};

}  // namespace sandglass

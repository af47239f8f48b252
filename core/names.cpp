// The snake_case names of the public enums, in one place.
#include <sandglass/cancel.hpp>
#include <sandglass/job_spec.hpp>
#include <sandglass/outcome.hpp>
#include <sandglass/reason.hpp>

#include <array>
#include <cstddef>

namespace sandglass {
namespace {

constexpr std::array<std::string_view, kReasonCount> kReasonNames = {
    "ok",
    "completed_after_cancel",
    "handler_error",
    "shutting_down",
    "budget_too_small",
    "deadline_implausible",
    "queue_full",
    "shed",
    "expired_in_queue",
    "too_late_to_start",
    "cancelled_in_queue",
    "cancelled_while_running",
    "deadline_exceeded_before_dispatch",
    "retry_skipped_budget",
    "breaker_open",
    "node_lost",
    "invalid_input",
};

// The state of each reason: the table in outcome.hpp.
constexpr std::array<State, kReasonCount> kStateOfReason = {
    State::completed,  // ok
    State::completed,  // completed_after_cancel
    State::failed,     // handler_error
    State::rejected,   // shutting_down
    State::rejected,   // budget_too_small
    State::rejected,   // deadline_implausible
    State::rejected,   // queue_full
    State::rejected,   // shed
    State::expired,    // expired_in_queue
    State::expired,    // too_late_to_start
    State::cancelled,  // cancelled_in_queue
    State::cancelled,  // cancelled_while_running
    State::failed,     // deadline_exceeded_before_dispatch
    State::failed,     // retry_skipped_budget
    State::failed,     // breaker_open
    State::failed,     // node_lost
    State::failed,     // invalid_input
};

constexpr std::array<std::string_view, 5> kCauseNames = {"none", "caller", "deadline", "upstream",
                                                         "shutdown"};
constexpr std::array<std::string_view, kPriorityCount> kPriorityNames = {"critical", "high",
                                                                         "normal", "sheddable"};
constexpr std::array<std::string_view, kStateCount> kStateNames = {"completed", "failed", "rejected",
                                                         "expired", "cancelled"};
constexpr std::array<std::string_view, kRetryStopCount> kRetryStopNames = {
    "none",      "attempts_exhausted", "retry_skipped_budget", "retry_budget_exhausted",
    "committed", "cancelled",          "rejected",             "shutting_down"};

template <typename Enum, std::size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, Enum value) noexcept {
  const auto index = static_cast<std::size_t>(value);
  return index < N ? names[index] : std::string_view{"unknown"};
}

template <typename Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::string_view, N>& names,
                             std::string_view name) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Reason reason) noexcept { return name_of(kReasonNames, reason); }
std::optional<Reason> reason_from_string(std::string_view name) noexcept {
  return value_of<Reason>(kReasonNames, name);
}

std::string_view to_string(CancelCause cause) noexcept { return name_of(kCauseNames, cause); }
std::optional<CancelCause> cancel_cause_from_string(std::string_view name) noexcept {
  return value_of<CancelCause>(kCauseNames, name);
}

std::string_view to_string(Priority priority) noexcept {
  return name_of(kPriorityNames, priority);
}
std::optional<Priority> priority_from_string(std::string_view name) noexcept {
  return value_of<Priority>(kPriorityNames, name);
}

std::string_view to_string(State state) noexcept { return name_of(kStateNames, state); }

std::string_view to_string(RetryStop stop) noexcept { return name_of(kRetryStopNames, stop); }

State state_of(Reason reason) noexcept {
  const auto index = static_cast<std::size_t>(reason);
  return index < kStateOfReason.size() ? kStateOfReason[index] : State::failed;
}

}  // namespace sandglass

// duration_arg.hpp — durations on the command line: a whole number and a unit, "500ms", "1s",
// "2m", "1h". A bare number is refused: a flag's value always says its unit.
//
//   parse_duration("250ms") == std::chrono::milliseconds{250}
//   duration_error("--budget", "5x")   // "--budget: \"5x\" is not a duration (e.g. 500ms, 1s, 2m)"
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace sandglass::cli {

// nullopt for anything but digits followed by ms, s, m or h, or for more than a year.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// The message for a value of `flag` that parse_duration refused.
std::string duration_error(std::string_view flag, std::string_view text);

}  // namespace sandglass::cli

// logging.hpp (private) — `setup_logging`, which points spdlog's default logger at stderr in
// sandglassd's text or JSON-lines format. stdout is left alone: it carries only the one
// "listening on HOST:PORT" line that scripts and tests read.
//
//   setup_logging("info", "json");
//   spdlog::info("draining {} jobs", 3);
//   // stderr: {"time":"2024-05-01T12:00:00.123Z","level":"info","msg":"draining 3 jobs"}
//
// text:  2024-05-01T12:00:00.123Z [info] draining 3 jobs
// json:  one object per line; "msg" is JSON-escaped (quotes, backslashes, control characters,
//        and bytes that are not UTF-8 become U+FFFD), so every line parses.
// Times are UTC with milliseconds; level names are the config's (`warn`, not `warning`).
//
// Thread safety: call `setup_logging` at start-up, before other threads log; logging through
// spdlog afterwards is safe from any thread (the sink is an `_mt` sink).
#pragma once

#include <array>
#include <string_view>

namespace sandglass::daemon {

// The names `log.level` and `--log-level` accept, in spdlog's level order (trace first).
inline constexpr std::array<std::string_view, 7> kLogLevels{"trace", "debug",    "info", "warn",
                                                            "error", "critical", "off"};
// The names `log.format` and `--log-format` accept.
inline constexpr std::array<std::string_view, 2> kLogFormats{"text", "json"};

// Replaces spdlog's default logger with one that writes to stderr at `level` in `format`.
// Throws ConfigError (key "log.level" or "log.format") for a name not listed above.
void setup_logging(std::string_view level, std::string_view format);

}  // namespace sandglass::daemon

// command_line.hpp (private) — `parse_command_line`: sandglassd's flags, applied over the config
// file, into a validated DaemonConfig and what main should do.
//
//   sandglassd --config sandglassd.toml --workers 8 --listen [::1]:0
//   CommandLine cl = parse_command_line(argc, argv);   // cl.action == Action::run
//
// Flags override the file's keys (`--workers` sets runtime.workers, and so on; see --help) and
// accept exactly the values those keys accept. `--help` and `--version` read no config file.
//
// Thread safety: a pure function.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>

#include <string>
#include <string_view>

namespace sandglass::daemon {

// The daemon's version; keep in step with project(VERSION) in the top CMakeLists.txt.
inline constexpr std::string_view kDaemonVersion = "0.1.0";

struct CommandLine {
  enum class Action { run, help, version, check_config, migrate };
  Action action = Action::run;
  std::string text;         // what to print (ends with a newline) for help, version, check_config
  DaemonConfig config;      // the file (if --config) with the flags applied over it, validated
  std::string config_path;  // empty when none
};

// Throws ConfigError naming the flag, or the file's key when the file alone is wrong (the
// caller exits with code 2).
CommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace sandglass::daemon

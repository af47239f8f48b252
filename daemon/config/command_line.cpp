#include "daemon/config/command_line.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace sandglass::daemon {
namespace {

// A flag that overrides one key of the config file; its value is read as that key's value.
struct OverrideFlag {
  const char* name;
  std::string_view key;
  const char* value_name;
  const char* help;
};

constexpr OverrideFlag kOverrideFlags[] = {
    {"--listen", "server.listen", "HOST:PORT",
     "address to serve on; IPv6 as [::1]:8080; port 0 picks a free port"},
    {"--workers", "runtime.workers", "N", "worker threads"},
    {"--capacity", "runtime.capacity", "N", "most jobs queued at once"},
    {"--default-budget-ms", "budget.default_ms", "MS", "budget of a job that asks for none"},
    {"--max-budget-ms", "budget.max_ms", "MS", "larger requested budgets are clamped to this"},
    {"--min-budget-ms", "budget.min_ms", "MS", "smaller budgets are rejected (budget_too_small)"},
    {"--reserve-ms", "budget.reserve_ms", "MS", "kept back for the answer, and from a budget passed on"},
    {"--drain-timeout-ms", "runtime.drain_timeout_ms", "MS",
     "on SIGTERM, how long queued and running jobs may finish"},
    {"--log-level", "log.level", "LEVEL", "trace, debug, info, warn, error, critical or off"},
    {"--log-format", "log.format", "FORMAT", "text or json (one object per line)"},
    {"--auth-token-file", "server.auth_token_file", "PATH",
     "file with the bearer token every path but /healthz, /readyz and /metrics requires "
     "(mode 0600 or 0400)"},
};
constexpr std::size_t kOverrideCount = std::size(kOverrideFlags);

// The message of a ConfigError without its "key: " prefix, to name a flag instead.
std::string message_of(const ConfigError& e) {
  std::string_view what = e.what();
  what.remove_prefix(std::min(what.size(), e.key().size() + 2));
  return std::string{what};
}

// CLI11's messages name the option they are about ("--workers: 1 required N missing",
// "Could not convert: --version = x"); the first "--name" in the message is taken as the flag.
ConfigError from_cli_error(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::size_t start = what.find("--");
  if (start == std::string::npos) return ConfigError{"command line", what};
  std::string flag = what.substr(start, what.find_first_of(" =:", start) - start);
  const std::string prefix = flag + ": ";
  return ConfigError{std::move(flag), what.starts_with(prefix) ? what.substr(prefix.size()) : what};
}

}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"sandglassd: a deadline-aware job queue served over HTTP/JSON.", "sandglassd"};
  app.set_help_flag();  // --help is an action returned to main, not an exception
  app.allow_extras();   // unknown arguments are reported below as a ConfigError naming them
  app.footer(
      "Flags override the config file's keys and take the same values.\n"
      "Exit status 2: invalid flags or configuration.");

  std::string config_path;
  CLI::Option* config_option =
      app.add_option("--config", config_path, "TOML config file; every key is optional")
          ->type_name("FILE");
  std::array<std::string, kOverrideCount> values;
  std::array<CLI::Option*, kOverrideCount> options{};
  for (std::size_t i = 0; i < kOverrideCount; ++i) {
    const OverrideFlag& flag = kOverrideFlags[i];
    options[i] = app.add_option(flag.name, values[i], flag.help)->type_name(flag.value_name);
  }
  bool help = false;
  bool version = false;
  bool check_config = false;
  app.add_flag("-h,--help", help, "print this help and exit");
  app.add_flag("--version", version, "print the version and exit");
  app.add_flag("--check-config", check_config,
               "check the config file and flags, print the result and exit");
  bool migrate = false;
  app.add_flag("--migrate", migrate,
               "apply the [cluster] database's schema migrations and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw from_cli_error(e);
  }

  CommandLine result;
  if (help) {
    result.action = CommandLine::Action::help;
    result.text = app.help();
    return result;
  }
  if (version) {
    result.action = CommandLine::Action::version;
    result.text = fmt::format("sandglassd {}\n", kDaemonVersion);
    return result;
  }
  if (const std::vector<std::string> extra = app.remaining(); !extra.empty()) {
    const std::string& first = extra.front();
    throw ConfigError{first.substr(0, first.find('=')),
                      first.starts_with('-')
                          ? "unknown flag (see --help)"
                          : "unexpected argument; sandglassd takes only flags (see --help)"};
  }

  if (config_option->count() > 0) {
    result.config_path = config_path;
    result.config = load_config_file(config_path);
  }
  for (std::size_t i = 0; i < kOverrideCount; ++i) {
    if (options[i]->count() == 0) continue;
    try {
      apply_setting(result.config, kOverrideFlags[i].key, values[i]);
    } catch (const ConfigError& e) {
      throw ConfigError{kOverrideFlags[i].name, message_of(e)};
    }
  }
  try {
    result.config.validate();
  } catch (const ConfigError& e) {
    // A key that a flag set is named by the flag: that is what the user typed last.
    for (std::size_t i = 0; i < kOverrideCount; ++i) {
      if (options[i]->count() > 0 && e.key() == kOverrideFlags[i].key) {
        throw ConfigError{kOverrideFlags[i].name, message_of(e)};
      }
    }
    throw;
  }

  if (migrate) {
    if (!result.config.cluster) {
      throw ConfigError{"--migrate", "needs a [cluster] table with a conninfo in the config file"};
    }
    result.action = CommandLine::Action::migrate;
    return result;
  }
  if (check_config) {
    result.action = CommandLine::Action::check_config;
    result.text = result.config_path.empty()
                      ? std::string{"configuration is valid (defaults and flags; no --config)\n"}
                      : fmt::format("{}: configuration is valid\n", result.config_path);
  }
  return result;
}

}  // namespace sandglass::daemon

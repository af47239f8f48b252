#include "daemon/config/command_line.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using sandglass::daemon::CommandLine;
using sandglass::daemon::ConfigError;
using sandglass::daemon::parse_command_line;

namespace {

const std::string kShippedConfig = sandglass::testing::source_path("daemon/config/sandglassd.toml");

// Parses `sandglassd ARGS...`.
CommandLine parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"sandglassd"};
  argv.insert(argv.end(), args);
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// What parsing threw: the ConfigError's key and what(), or key "" and "no error".
struct Thrown {
  std::string key;
  std::string what;
};

Thrown parse_error(std::initializer_list<const char*> args) {
  try {
    (void)parse(args);
  } catch (const ConfigError& e) {
    return {e.key(), e.what()};
  }
  return {"", "no error"};
}

}  // namespace

TEST_SUITE("CommandLine") {
  TEST_CASE("no arguments run the daemon with the default config") {
    const CommandLine cl = parse({});
    CHECK(cl.action == CommandLine::Action::run);
    CHECK(cl.text.empty());
    CHECK(cl.config_path.empty());
    CHECK(cl.config.listen_host == "127.0.0.1");
    CHECK(cl.config.listen_port == 8080);
    CHECK(cl.config.commands.empty());
  }

  TEST_CASE("each flag sets its config key") {
    const CommandLine cl =
        parse({"--listen", "[::1]:0", "--workers", "3", "--capacity", "40", "--default-budget-ms",
               "500", "--max-budget-ms", "900", "--min-budget-ms", "2", "--reserve-ms", "0",
               "--drain-timeout-ms", "1500", "--log-level", "warn", "--log-format=json"});
    CHECK(cl.action == CommandLine::Action::run);
    CHECK(cl.config.listen_host == "::1");
    CHECK(cl.config.listen_port == 0);
    CHECK(cl.config.runtime.workers == 3);
    CHECK(cl.config.runtime.capacity == 40);
    CHECK(cl.config.runtime.budget.default_budget == 500ms);
    CHECK(cl.config.runtime.budget.max_budget == 900ms);
    CHECK(cl.config.runtime.budget.min_useful == 2ms);
    CHECK(cl.config.runtime.budget.reserve == 0ms);
    CHECK(cl.config.drain_timeout == 1500ms);
    CHECK(cl.config.log_level == "warn");
    CHECK(cl.config.log_format == "json");
  }

  TEST_CASE("flags override the config file and keep its other keys") {
    const CommandLine cl =
        parse({"--config", kShippedConfig.c_str(), "--listen", "127.0.0.1:0", "--capacity", "7"});
    CHECK(cl.action == CommandLine::Action::run);
    CHECK(cl.config_path == kShippedConfig);
    CHECK(cl.config.listen_port == 0);       // the file says 8080
    CHECK(cl.config.runtime.capacity == 7);  // the file says 1024
    CHECK(cl.config.commands.size() == 2);
    CHECK(cl.config.commands.contains("echo"));
    CHECK(cl.config.commands.contains("cat"));
  }

  TEST_CASE("a bad flag value is an error naming the flag") {
    SUBCASE("not a number") {
      const Thrown e = parse_error({"--workers", "abc"});
      CHECK(e.key == "--workers");
      CHECK(e.what == R"(--workers: must be an integer between 1 and 1024, got "abc")");
    }
    SUBCASE("a negative duration") {
      const Thrown e = parse_error({"--drain-timeout-ms", "-1"});
      CHECK(e.what == "--drain-timeout-ms: must be an integer between 0 and 604800000, got -1");
    }
    SUBCASE("a host name to listen on") {
      const Thrown e = parse_error({"--listen", "localhost:80"});
      CHECK(e.key == "--listen");
    }
    SUBCASE("an unknown log level") {
      const Thrown e = parse_error({"--log-level", "loud"});
      CHECK(e.what == "--log-level: must be one of trace, debug, info, warn, error, critical, off, "
                      R"(got "loud")");
    }
  }

  TEST_CASE("a flag that breaks a rule between keys is named in the error") {
    const Thrown e = parse_error({"--max-budget-ms", "10"});
    CHECK(e.key == "--max-budget-ms");
    CHECK(e.what == "--max-budget-ms: must not be less than budget.default_ms (30000), got 10");
  }

  TEST_CASE("a flag without its value is an error naming the flag") {
    const Thrown e = parse_error({"--workers"});
    CHECK(e.key == "--workers");
  }

  TEST_CASE("an unknown flag is an error naming it") {
    CHECK(parse_error({"--wrokers", "2"}).what == "--wrokers: unknown flag (see --help)");
    CHECK(parse_error({"--wrokers=2"}).key == "--wrokers");
  }

  TEST_CASE("a positional argument is an error naming it") {
    const Thrown e = parse_error({"sandglassd.toml"});
    CHECK(e.what ==
          "sandglassd.toml: unexpected argument; sandglassd takes only flags (see --help)");
  }

  TEST_CASE("a missing config file is an error naming --config") {
    const Thrown e = parse_error({"--config", "/nonexistent/sandglassd.toml"});
    CHECK(e.what ==
          R"(--config: cannot read "/nonexistent/sandglassd.toml": No such file or directory)");
  }

  TEST_CASE("--help returns the help text without reading the config file") {
    const CommandLine cl = parse({"--config", "/nonexistent/sandglassd.toml", "--help"});
    CHECK(cl.action == CommandLine::Action::help);
    CHECK(
        cl.text.starts_with("sandglassd: a deadline-aware job queue served over HTTP/JSON.\n"
                            "Usage: sandglassd [OPTIONS]\n"));
    CHECK(cl.text.find("--drain-timeout-ms MS") != std::string::npos);
    CHECK(cl.text.find("--check-config") != std::string::npos);
    CHECK(cl.text.ends_with("\n"));
  }

  TEST_CASE("--version returns the version line") {
    const CommandLine cl = parse({"--version"});
    CHECK(cl.action == CommandLine::Action::version);
    CHECK(cl.text == "sandglassd 0.1.0\n");
  }

  TEST_CASE("--check-config validates the file and flags and returns a summary") {
    const CommandLine cl = parse({"--config", kShippedConfig.c_str(), "--check-config"});
    CHECK(cl.action == CommandLine::Action::check_config);
    CHECK(cl.text == kShippedConfig + ": configuration is valid\n");
    CHECK(cl.config.commands.size() == 2);
  }

  TEST_CASE("--check-config reports an invalid flag as an error") {
    const Thrown e = parse_error({"--check-config", "--min-budget-ms", "40000"});
    CHECK(e.what ==
          "--min-budget-ms: must not be greater than budget.default_ms (30000), got 40000");
  }
}

#include <sandglass/daemon/daemon_config.hpp>

#include "config_test_support.hpp"
#include "test_paths.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;
using sandglass::daemon::apply_setting;
using sandglass::daemon::CommandConfig;
using sandglass::daemon::DaemonConfig;
using sandglass::daemon::load_config_file;
using sandglass::daemon::parse_config;
using sandglass::testing::parse_error;
using sandglass::testing::thrown_by;
using sandglass::testing::Thrown;
using sandglass::testing::validate_error;

namespace {

const std::string kShippedConfig = sandglass::testing::source_path("daemon/config/sandglassd.toml");

}  // namespace

TEST_SUITE("DaemonConfig") {
  TEST_CASE("an empty file gives the defaults") {
    const DaemonConfig c = parse_config("");
    const DaemonConfig defaults;
    CHECK(c.listen_host == "127.0.0.1");
    CHECK(c.listen_port == 8080);
    CHECK(c.io_threads == 1);
    CHECK(c.limits.max_body_bytes == 1u << 20);
    CHECK(c.limits.max_header_bytes == 16u << 10);
    CHECK(c.limits.max_connections == 1024);
    CHECK(c.limits.read_timeout == 10s);
    CHECK(c.limits.write_timeout == 10s);
    CHECK(c.limits.idle_timeout == 60s);
    CHECK(c.limits.max_json_depth == 32);
    CHECK(c.runtime.workers == defaults.runtime.workers);
    CHECK(c.runtime.capacity == 1024);
    CHECK(c.runtime.budget.default_budget == 30s);
    CHECK(c.runtime.budget.max_budget == 5min);
    CHECK(c.runtime.budget.min_useful == 1ms);
    CHECK(c.runtime.budget.reserve == 5ms);
    CHECK(c.runtime.kind_limits.empty());
    CHECK(c.runtime.drop_if_cannot_finish);
    CHECK(c.runtime.estimate_quantile == 0.99);
    CHECK(c.drain_timeout == 10s);
    CHECK(c.records.keep == 300s);
    CHECK(c.records.max_count == 10'000);
    CHECK(c.records.max_bytes == 64u << 20);
    CHECK(c.log_level == "info");
    CHECK(c.log_format == "text");
    CHECK(c.commands.empty());
    CHECK(validate_error(c).what == "no error");
  }

  TEST_CASE("every section is read into its fields") {
    const DaemonConfig c = parse_config(R"(
      [server]
      listen = "0.0.0.0:9090"
      io_threads = 3
      max_body_bytes = 2048
      max_header_bytes = 4096
      max_connections = 50
      read_timeout_ms = 1500
      write_timeout_ms = 2500
      idle_timeout_ms = 3500
      max_json_depth = 8

      [runtime]
      workers = 6
      capacity = 77
      drain_timeout_ms = 0
      drop_if_cannot_finish = false
      estimate_quantile = 0.5

      [budget]
      default_ms = 200
      max_ms = 900
      min_ms = 4
      reserve_ms = 7

      [records]
      keep_ms = 60000
      max_count = 12
      max_bytes = 4096

      [log]
      level = "debug"
      format = "json"

      [kinds.spin]
      limit = 2

      [commands.greet]
      argv = ["/bin/echo", "hi", ""]
      env = { PATH = "/usr/bin", LANG = "C" }
      working_directory = "/tmp"
      max_output_bytes = 0
      kill_grace_ms = 250
      allow_stdin = false
    )");
    CHECK(c.listen_host == "0.0.0.0");
    CHECK(c.listen_port == 9090);
    CHECK(c.io_threads == 3);
    CHECK(c.limits.max_body_bytes == 2048);
    CHECK(c.limits.max_header_bytes == 4096);
    CHECK(c.limits.max_connections == 50);
    CHECK(c.limits.read_timeout == 1500ms);
    CHECK(c.limits.write_timeout == 2500ms);
    CHECK(c.limits.idle_timeout == 3500ms);
    CHECK(c.limits.max_json_depth == 8);
    CHECK(c.runtime.workers == 6);
    CHECK(c.runtime.capacity == 77);
    CHECK(c.drain_timeout == 0ms);
    CHECK_FALSE(c.runtime.drop_if_cannot_finish);
    CHECK(c.runtime.estimate_quantile == 0.5);
    CHECK(c.runtime.budget.default_budget == 200ms);
    CHECK(c.runtime.budget.max_budget == 900ms);
    CHECK(c.runtime.budget.min_useful == 4ms);
    CHECK(c.runtime.budget.reserve == 7ms);
    CHECK(c.records.keep == 60s);
    CHECK(c.records.max_count == 12);
    CHECK(c.records.max_bytes == 4096);
    CHECK(c.log_level == "debug");
    CHECK(c.log_format == "json");
    CHECK(c.runtime.kind_limits == std::map<std::string, std::size_t, std::less<>>{{"spin", 2}});
    REQUIRE(c.commands.size() == 1);
    const CommandConfig& greet = c.commands.at("greet");
    CHECK(greet.argv == std::vector<std::string>{"/bin/echo", "hi", ""});
    CHECK(greet.env == std::map<std::string, std::string>{{"LANG", "C"}, {"PATH", "/usr/bin"}});
    CHECK(greet.working_directory == "/tmp");
    CHECK(greet.max_output_bytes == 0);
    CHECK(greet.kill_grace == 250ms);
    CHECK_FALSE(greet.allow_stdin);
    CHECK(validate_error(c).what == "no error");
  }

  TEST_CASE("a command keeps the defaults of the keys it does not name") {
    const DaemonConfig c = parse_config("[commands.cat]\nargv = [\"/bin/cat\"]\n");
    const CommandConfig& cat = c.commands.at("cat");
    CHECK(cat.argv == std::vector<std::string>{"/bin/cat"});
    CHECK(cat.env.empty());
    CHECK(cat.working_directory == "/");
    CHECK(cat.max_output_bytes == 1u << 20);
    CHECK(cat.kill_grace == 2s);
    CHECK(cat.allow_stdin);
  }

  TEST_CASE("an IPv6 listen address in brackets is stored without the brackets") {
    const DaemonConfig c = parse_config("[server]\nlisten = \"[::1]:0\"\n");
    CHECK(c.listen_host == "::1");
    CHECK(c.listen_port == 0);
  }

  TEST_CASE("estimate_window and estimate_max_age_ms set how long run times are kept") {
    const DaemonConfig c =
        parse_config("[runtime]\nestimate_window = 512\nestimate_max_age_ms = 250\n");
    CHECK(c.runtime.estimate_window == 512);
    CHECK(c.runtime.estimate_max_age == std::chrono::milliseconds{250});
    CHECK(parse_error("[runtime]\nestimate_window = 0\n").what ==
          "runtime.estimate_window: must be an integer between 1 and 1000000, got 0");
  }

  TEST_CASE("admission.queue_delay_target_ms sets the standing-queue rule's target, 0 is adaptive") {
    CHECK(parse_config("[admission]\nqueue_delay_target_ms = 15\n").runtime.queue_delay_target ==
          std::chrono::milliseconds{15});
    CHECK(parse_config("").runtime.queue_delay_target == sandglass::Duration::zero());
    CHECK(parse_error("[admission]\nqueue_delay_target_ms = -1\n").what.rfind(
              "admission.queue_delay_target_ms: ", 0) == 0);
  }

  TEST_CASE("estimate_age_in_runs sets how many median runs a run time is kept at least") {
    CHECK(parse_config("[runtime]\nestimate_age_in_runs = 2.5\n").runtime.estimate_age_in_runs ==
          2.5);
    CHECK(parse_config("[runtime]\nestimate_age_in_runs = 0\n").runtime.estimate_age_in_runs == 0);
    CHECK(parse_config("").runtime.estimate_age_in_runs == sandglass::RuntimeOptions{}.estimate_age_in_runs);
    CHECK(parse_error("[runtime]\nestimate_age_in_runs = -1\n").what ==
          "runtime.estimate_age_in_runs: must be a number from 0 to 1000000, got -1");
    CHECK(parse_error("[runtime]\nestimate_age_in_runs = \"10\"\n").what ==
          "runtime.estimate_age_in_runs: must be a number from 0 to 1000000, got \"10\"");
  }

  TEST_CASE("an integer estimate_quantile of 1 is read as 1.0") {
    CHECK(parse_config("[runtime]\nestimate_quantile = 1\n").runtime.estimate_quantile == 1.0);
  }

  TEST_CASE("the batch and pending body limits are read from [server] and must be positive") {
    const auto config =
        parse_config("[server]\nmax_batch = 7\nmax_pending_body_bytes = 4096\n");
    CHECK(config.limits.max_batch == 7);
    CHECK(config.limits.max_pending_body_bytes == 4096);
    CHECK(parse_config("").limits.max_batch == 1000);
    CHECK(parse_config("").limits.max_pending_body_bytes == std::size_t{64} << 20);
    CHECK(parse_error("[server]\nmax_batch = 0\n").key == "server.max_batch");
    CHECK(parse_error("[server]\nmax_pending_body_bytes = 0\n").key == "server.max_pending_body_bytes");
  }

  TEST_CASE("an unknown key is an error naming its dotted key") {
    SUBCASE("in a section") {
      const Thrown e = parse_error("[server]\nlisten_on = \"127.0.0.1:1\"\n");
      CHECK(e.key == "server.listen_on");
      CHECK(e.what ==
            "server.listen_on: unknown key; known keys here: listen, io_threads, max_body_bytes, "
            "max_header_bytes, max_connections, read_timeout_ms, write_timeout_ms, "
            "idle_timeout_ms, max_json_depth, max_batch, max_pending_body_bytes, auth_token_file, max_delay_ms");
    }
    SUBCASE("at the top level") {
      const Thrown e = parse_error("workers = 4\n");
      CHECK(e.key == "workers");
      CHECK(e.what ==
            "workers: unknown key; known tables: server, runtime, budget, records, admission, log, kinds, "
            "commands, upstreams, databases, queries, cluster");
    }
    SUBCASE("in a kind") {
      const Thrown e = parse_error("[kinds.spin]\nlimit = 1\nmax = 2\n");
      CHECK(e.key == "kinds.spin.max");
      CHECK(e.what == "kinds.spin.max: unknown key; known keys here: limit");
    }
    SUBCASE("in a command") {
      const Thrown e = parse_error("[commands.echo]\nargv = [\"/bin/echo\"]\nargs = []\n");
      CHECK(e.key == "commands.echo.args");
    }
  }

  TEST_CASE("a key that is empty or not bare is named quoted as TOML writes it") {
    // Found by fuzz_daemon_config: an empty table name gave an error that named no key.
    const Thrown empty = parse_error("[\"\"]\na = 1\n");
    CHECK(empty.key == "\"\"");
    CHECK(empty.what.starts_with("\"\": unknown key; known tables: server"));
    const Thrown dotted = parse_error("[commands.\"a.b\"]\nargv = [\"/bin/true\"]\nargs = 1\n");
    CHECK(dotted.key == "commands.\"a.b\".args");
    const Thrown in_section = parse_error("[server]\n\"\" = 1\n");
    CHECK(in_section.key == "server.\"\"");
  }

  TEST_CASE("a value of the wrong type is an error naming its key and the value") {
    SUBCASE("a string for an integer") {
      const Thrown e = parse_error("[server]\nmax_body_bytes = \"abc\"\n");
      CHECK(e.key == "server.max_body_bytes");
      CHECK(e.what ==
            R"(server.max_body_bytes: must be an integer between 1 and 1073741824, got "abc")");
    }
    SUBCASE("a float for an integer") {
      const Thrown e = parse_error("[runtime]\nworkers = 2.5\n");
      CHECK(e.what == "runtime.workers: must be an integer between 1 and 1024, got 2.5");
    }
    SUBCASE("an integer for a boolean") {
      const Thrown e = parse_error("[runtime]\ndrop_if_cannot_finish = 1\n");
      CHECK(e.what == "runtime.drop_if_cannot_finish: must be true or false, got 1");
    }
    SUBCASE("an unknown log level") {
      const Thrown e = parse_error("[log]\nlevel = \"loud\"\n");
      CHECK(e.what == "log.level: must be one of trace, debug, info, warn, error, critical, off, "
                      R"(got "loud")");
    }
    SUBCASE("an unknown log format") {
      const Thrown e = parse_error("[log]\nformat = \"xml\"\n");
      CHECK(e.what == R"(log.format: must be one of text, json, got "xml")");
    }
    SUBCASE("a value where a table belongs") {
      const Thrown e = parse_error("server = 3\n");
      CHECK(e.what == "server: must be a table, got 3");
    }
    SUBCASE("a string for argv") {
      const Thrown e = parse_error("[commands.echo]\nargv = \"/bin/echo hi\"\n");
      CHECK(e.what ==
            "commands.echo.argv: must be a non-empty array of strings, the first an "
            R"(absolute path, got "/bin/echo hi")");
    }
    SUBCASE("a number inside argv") {
      const Thrown e = parse_error("[commands.echo]\nargv = [\"/bin/echo\", 3]\n");
      CHECK(e.key == "commands.echo.argv[1]");
      CHECK(e.what == "commands.echo.argv[1]: must be a string, got 3");
    }
    SUBCASE("a number as an environment value") {
      const Thrown e = parse_error("[commands.echo]\nargv = [\"/bin/echo\"]\nenv = { N = 1 }\n");
      CHECK(e.what == "commands.echo.env.N: must be a string, got 1");
    }
    SUBCASE("a string with a quote is escaped in the message") {
      const Thrown e = parse_error("[server]\nio_threads = 'say \"hi\"'\n");
      CHECK(e.what ==
            R"(server.io_threads: must be an integer between 1 and 256, got "say \"hi\"")");
    }
  }

  TEST_CASE("an integer out of range is an error naming its key") {
    SUBCASE("zero workers") {
      const Thrown e = parse_error("[runtime]\nworkers = 0\n");
      CHECK(e.what == "runtime.workers: must be an integer between 1 and 1024, got 0");
    }
    SUBCASE("a zero timeout") {
      const Thrown e = parse_error("[server]\nread_timeout_ms = 0\n");
      CHECK(e.what == "server.read_timeout_ms: must be an integer between 1 and 604800000, got 0");
    }
    SUBCASE("a negative drain timeout") {
      const Thrown e = parse_error("[runtime]\ndrain_timeout_ms = -1\n");
      CHECK(e.what ==
            "runtime.drain_timeout_ms: must be an integer between 0 and 604800000, got -1");
    }
    SUBCASE("a body limit above 1 GiB") {
      const Thrown e = parse_error("[server]\nmax_body_bytes = 1073741825\n");
      CHECK(e.key == "server.max_body_bytes");
    }
    SUBCASE("a zero kind limit") {
      const Thrown e = parse_error("[kinds.spin]\nlimit = 0\n");
      CHECK(e.key == "kinds.spin.limit");
    }
    SUBCASE("a quantile above 1") {
      const Thrown e = parse_error("[runtime]\nestimate_quantile = 1.5\n");
      CHECK(e.what ==
            "runtime.estimate_quantile: must be a number greater than 0 and at most 1, got 1.5");
    }
  }

  TEST_CASE("a bad listen address is an error naming server.listen") {
    const std::string expected = R"("HOST:PORT" with an IP address as HOST )"
                                 R"((IPv6 in brackets: "[::1]:8080") and PORT 0-65535)";
    std::string listen;
    SUBCASE("a host name") { listen = "localhost:8080"; }
    SUBCASE("no port") { listen = "127.0.0.1"; }
    SUBCASE("an empty port") { listen = "127.0.0.1:"; }
    SUBCASE("a port above 65535") { listen = "127.0.0.1:65536"; }
    SUBCASE("a port with a letter") { listen = "127.0.0.1:8o80"; }
    SUBCASE("IPv6 without brackets") { listen = "::1:8080"; }
    SUBCASE("IPv6 brackets without a colon") { listen = "[::1]8080"; }
    SUBCASE("IPv4 in brackets") { listen = "[127.0.0.1]:8080"; }
    const Thrown e = parse_error("[server]\nlisten = \"" + listen + "\"\n");
    CHECK(e.key == "server.listen");
    CHECK(e.what ==
          "server.listen: must be " + expected + ", got \"" + listen + "\"");
  }

  TEST_CASE("a command whose program is not an absolute path is an error naming its argv") {
    const Thrown e = parse_error("[commands.echo]\nargv = [\"echo\", \"hi\"]\n");
    CHECK(e.key == "commands.echo.argv");
    CHECK(e.what == "commands.echo.argv: argv[0] must be an absolute path (there is no PATH "
                    R"(search), got "echo")");
  }

  TEST_CASE("a command with an empty or missing argv is an error naming its argv") {
    std::string toml;
    SUBCASE("empty") { toml = "[commands.echo]\nargv = []\n"; }
    SUBCASE("missing") { toml = "[commands.echo]\nallow_stdin = true\n"; }
    const Thrown e = parse_error(toml);
    CHECK(e.what ==
          "commands.echo.argv: is missing or empty; must be a non-empty array of "
          "strings, the first an absolute path");
  }

  TEST_CASE("a relative working directory is an error naming it") {
    const Thrown e =
        parse_error("[commands.echo]\nargv = [\"/bin/echo\"]\nworking_directory = \"tmp\"\n");
    CHECK(e.what == R"(commands.echo.working_directory: must be an absolute path, got "tmp")");
  }

  TEST_CASE("a kind without a limit is an error naming the limit") {
    const Thrown e = parse_error("[kinds.spin]\n");
    CHECK(e.what ==
          "kinds.spin.limit: is missing (the most jobs of this kind that may run at once)");
  }

  TEST_CASE("a TOML syntax error names the source and the line") {
    const Thrown e = parse_error("[server]\nio_threads = 2\nlisten = \n");
    CHECK(e.key == "config");
    CHECK(e.what.starts_with("config: line 3, column "));
  }

  TEST_CASE("validate names budget.max_ms when it is below the default budget") {
    DaemonConfig c = parse_config("[budget]\nmax_ms = 1000\n");
    CHECK(validate_error(c).what ==
          "budget.max_ms: must not be less than budget.default_ms (30000), got 1000");
  }

  TEST_CASE("validate names budget.min_ms when it is above the default budget") {
    DaemonConfig c = parse_config("[budget]\ndefault_ms = 100\nmin_ms = 101\n");
    CHECK(validate_error(c).what ==
          "budget.min_ms: must not be greater than budget.default_ms (100), got 101");
  }

  TEST_CASE("validate names the file's key for an error found by RuntimeOptions") {
    DaemonConfig c;
    SUBCASE("workers") {
      c.runtime.workers = 0;
      CHECK(validate_error(c).what == "runtime.workers: must be at least 1");
    }
    SUBCASE("a kind limit") {
      c.runtime.kind_limits["spin"] = 0;
      CHECK(validate_error(c).what == "kinds.spin.limit: must be at least 1");
    }
    SUBCASE("a negative reserve") {
      c.runtime.budget.reserve = -1ms;
      CHECK(validate_error(c).what == "budget.reserve_ms: must not be negative");
    }
  }

  TEST_CASE("validate rejects values set in code that the file could not hold") {
    DaemonConfig c;
    SUBCASE("a host name") {
      c.listen_host = "localhost";
      CHECK(validate_error(c).what ==
            R"(server.listen: the host must be an IP address, got "localhost")");
    }
    SUBCASE("a zero read timeout") {
      c.limits.read_timeout = 0ms;
      CHECK(validate_error(c).what == "server.read_timeout_ms: must be at least 1, got 0");
    }
    SUBCASE("zero I/O threads") {
      c.io_threads = 0;
      CHECK(validate_error(c).what == "server.io_threads: must be at least 1, got 0");
    }
    SUBCASE("an unknown log format") {
      c.log_format = "xml";
      CHECK(validate_error(c).what == R"(log.format: must be one of text, json, got "xml")");
    }
    SUBCASE("a relative program") {
      c.commands["ls"] = CommandConfig{.argv = {"ls"}};
      CHECK(validate_error(c).key == "commands.ls.argv");
    }
    SUBCASE("an environment name with '='") {
      c.commands["ls"] = CommandConfig{.argv = {"/bin/ls"}, .env = {{"A=B", "c"}}};
      CHECK(validate_error(c).what ==
            "commands.ls.env.A=B: a variable name must be non-empty and without '='");
    }
  }

  TEST_CASE("apply_setting reads text as the file reads the key") {
    DaemonConfig c;
    apply_setting(c, "runtime.workers", "8");
    apply_setting(c, "server.listen", "[::1]:9000");
    apply_setting(c, "log.format", "json");
    apply_setting(c, "budget.reserve_ms", "0");
    CHECK(c.runtime.workers == 8);
    CHECK(c.listen_host == "::1");
    CHECK(c.listen_port == 9000);
    CHECK(c.log_format == "json");
    CHECK(c.runtime.budget.reserve == 0ms);
  }

  TEST_CASE("apply_setting errors name the key") {
    DaemonConfig c;
    CHECK(thrown_by([&c] { apply_setting(c, "runtime.workers", "eight"); }).what ==
          R"(runtime.workers: must be an integer between 1 and 1024, got "eight")");
    CHECK(thrown_by([&c] { apply_setting(c, "runtime.workers", ""); }).what ==
          R"(runtime.workers: must be an integer between 1 and 1024, got "")");
    CHECK(thrown_by([&c] { apply_setting(c, "runtime.sleepers", "1"); }).what ==
          "runtime.sleepers: not a key that can be set this way");
    CHECK(thrown_by([&c] { apply_setting(c, "workers", "1"); }).key == "workers");
  }

  TEST_CASE("load_config_file on a missing file is an error naming --config") {
    const Thrown e = thrown_by([] { (void)load_config_file("/nonexistent/sandglassd.toml"); });
    CHECK(e.key == "--config");
    CHECK(e.what ==
          R"(--config: cannot read "/nonexistent/sandglassd.toml": No such file or directory)");
  }

  TEST_CASE("load_config_file names the file and line of a syntax error") {
    const std::string name = "sandglass_config_test_" + std::to_string(::getpid()) + ".toml";
    const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
    std::ofstream{path} << "[runtime]\nworkers = = 2\n";
    const Thrown e = thrown_by([&path] { (void)load_config_file(path.string()); });
    std::filesystem::remove(path);
    CHECK(e.key == path.string());
    CHECK(e.what.starts_with(path.string() + ": line 2, column "));
  }

  TEST_CASE("the shipped sandglassd.toml loads and validates") {
    const DaemonConfig c = load_config_file(kShippedConfig);
    const DaemonConfig d;  // the file states the defaults
    CHECK(validate_error(c).what == "no error");
    CHECK(c.listen_host == d.listen_host);
    CHECK(c.listen_port == d.listen_port);
    CHECK(c.io_threads == d.io_threads);
    CHECK(c.limits.max_body_bytes == d.limits.max_body_bytes);
    CHECK(c.limits.max_header_bytes == d.limits.max_header_bytes);
    CHECK(c.limits.max_connections == d.limits.max_connections);
    CHECK(c.limits.read_timeout == d.limits.read_timeout);
    CHECK(c.limits.write_timeout == d.limits.write_timeout);
    CHECK(c.limits.idle_timeout == d.limits.idle_timeout);
    CHECK(c.limits.max_json_depth == d.limits.max_json_depth);
    CHECK(c.runtime.workers == d.runtime.workers);
    CHECK(c.runtime.capacity == d.runtime.capacity);
    CHECK(c.runtime.budget.default_budget == d.runtime.budget.default_budget);
    CHECK(c.runtime.budget.max_budget == d.runtime.budget.max_budget);
    CHECK(c.runtime.budget.min_useful == d.runtime.budget.min_useful);
    CHECK(c.runtime.budget.reserve == d.runtime.budget.reserve);
    CHECK(c.runtime.kind_limits == d.runtime.kind_limits);
    CHECK(c.runtime.drop_if_cannot_finish == d.runtime.drop_if_cannot_finish);
    CHECK(c.runtime.estimate_quantile == d.runtime.estimate_quantile);
    CHECK(c.runtime.estimate_window == d.runtime.estimate_window);
    CHECK(c.runtime.estimate_max_age == d.runtime.estimate_max_age);
    CHECK(c.runtime.overrun_after == d.runtime.overrun_after);
    CHECK(c.runtime.queue_delay_target == d.runtime.queue_delay_target);
    CHECK(c.drain_timeout == d.drain_timeout);
    CHECK(c.records.keep == d.records.keep);
    CHECK(c.records.max_count == d.records.max_count);
    CHECK(c.records.max_bytes == d.records.max_bytes);
    CHECK(c.log_level == d.log_level);
    CHECK(c.log_format == d.log_format);
    REQUIRE(c.commands.size() == 2);
    const CommandConfig& echo = c.commands.at("echo");
    CHECK(echo.argv == std::vector<std::string>{"/bin/echo", "hello from sandglassd"});
    CHECK(echo.env == std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}});
    CHECK_FALSE(echo.allow_stdin);
    const CommandConfig& cat = c.commands.at("cat");
    CHECK(cat.argv == std::vector<std::string>{"/bin/cat"});
    CHECK(cat.env == std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}});
    CHECK(cat.allow_stdin);
  }
}

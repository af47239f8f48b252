// daemon_config.hpp — `DaemonConfig`, everything `sandglassd` reads from its TOML file and
// command line, with safe defaults; and `ConfigError`, which names the offending key.
//
//   sandglass::daemon::DaemonConfig config = sandglass::daemon::load_config_file("sandglassd.toml");
//   config.listen_port = 0;   // pick a free port
//
// Time rules: durations are `std::chrono` values, never negative; those that make no sense at zero
// (I/O timeouts, records.keep) are positive. In the file they are integers with their unit in
// the key (`drain_timeout_ms`).
//
// Thread safety: a value type.
#pragma once

#include <sandglass/daemon/sql_config.hpp>
#include <sandglass/deadline.hpp>
#include <sandglass/runtime.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sandglass::daemon {

// A configuration or command-line error. `key()` is the dotted TOML key or the flag
// (e.g. "server.max_body_bytes", "--workers").
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string key, const std::string& message)
      : std::runtime_error{key + ": " + message}, key_{std::move(key)} {}
  const std::string& key() const noexcept { return key_; }

 private:
  std::string key_;
};

// Limits that keep one client from holding the daemon (docs/operations.md, "Shutdown and limits").
struct ServerLimits {
  std::size_t max_body_bytes = 1 << 20;         // larger bodies: 413
  std::size_t max_header_bytes = 16 << 10;      // larger header sections: 431
  std::size_t max_connections = 1024;           // more are accepted and closed at once
  std::chrono::milliseconds read_timeout{10'000};   // to read one request once it started
  std::chrono::milliseconds write_timeout{10'000};  // to write one response
  std::chrono::milliseconds idle_timeout{60'000};   // a keep-alive connection with no request
  std::size_t max_json_depth = 32;              // deeper request bodies: 400
  std::chrono::milliseconds max_delay{3'600'000};  // a longer delay_ms: 400 naming it
  std::size_t max_batch = 1000;                 // jobs in one POST /v1/jobs/batch; more: 400
  // Bodies being read at once, all connections together (each counts its Content-Length, or
  // max_body_bytes when chunked, from its header section until its body is read); a request
  // that would pass this: 503.
  std::size_t max_pending_body_bytes = 64 << 20;
};

// How long terminal job records stay queryable with GET /v1/jobs/{id}.
struct RecordRetention {
  std::chrono::milliseconds keep{300'000};
  std::size_t max_count = 10'000;  // the oldest terminal records go first
  std::size_t max_bytes = 64 << 20;  // results and errors kept, in all; the oldest go first
};

// One `[commands.NAME]` table: a program the `exec` kind may run. Clients name it; they never
// supply a program or arguments.
struct CommandConfig {
  std::vector<std::string> argv;              // argv[0] is an absolute path; no shell
  std::map<std::string, std::string> env;     // the whole environment of the command
  std::string working_directory = "/";
  std::size_t max_output_bytes = 1 << 20;     // per stream; the rest is drained and dropped
  std::chrono::milliseconds kill_grace{2'000};  // SIGTERM, then SIGKILL after this
  bool allow_stdin = true;                    // whether a request may pass "stdin"
};

// One `[upstreams.NAME]` table: a dependency the `forward` kind may call. Clients name it; they
// never supply a URL.
struct UpstreamConfig {
  std::string url;                 // "http://IP:PORT/path" (plain HTTP, an IP literal)
  std::string host;                // parsed from url, without brackets
  std::uint16_t port = 0;          // parsed from url
  std::string target = "/";        // parsed from url: path and query
  std::chrono::milliseconds cap{30'000};     // most budget one attempt gets
  std::chrono::milliseconds reserve{5};      // kept back from what is passed on
  int max_attempts = 3;                      // first attempt included
  std::chrono::milliseconds base_backoff{50};
  std::chrono::milliseconds max_backoff{1'000};
  bool full_jitter = true;                   // wait uniformly in [0, cap]; false: the whole cap
  int failure_threshold = 5;                 // consecutive failures that open the breaker
  std::chrono::milliseconds cooldown{5'000}; // open this long before one probe
  std::size_t max_response_bytes = 1 << 20;  // a longer answer fails the attempt
};

// The `[cluster]` table: many sandglassd share one deadline-ordered queue in PostgreSQL (see
// docs/cluster.md). Absent: the daemon works alone.
struct ClusterConfig {
  std::string conninfo;             // libpq connection string or URI of the shared database
  std::string node;                 // this node's name; empty: the listen address, HOST:PORT
  std::size_t claim_batch = 16;     // most jobs one claim takes (never more than free workers)
  // Claimed jobs a node may hold beyond its workers, waiting in its local queue, while the
  // cluster's queue has a backlog (docs/cluster.md); 0: none; unset: a quarter of the workers
  // (1 to 16), never more than runtime.capacity − runtime.workers.
  std::optional<std::size_t> claim_ahead;
  std::chrono::milliseconds heartbeat{200};  // how often the node says it is alive
  std::chrono::milliseconds lease{2'000};    // silent this long: its running jobs are taken back
  std::chrono::milliseconds poll{250};       // claim this often even when no NOTIFY arrived
  std::vector<std::string> kinds;   // the kinds this node claims; empty: every kind it knows
  // Every node session (not a migration's) runs with these server-side limits, so that a lock a
  // DBA holds or a stuck statement answers with an error instead of holding a thread and its
  // connection: the longest a statement may run, wait for one lock, or a transaction sit idle.
  std::chrono::milliseconds statement_timeout{10'000};
  std::chrono::milliseconds lock_timeout{2'000};
  std::chrono::milliseconds idle_in_transaction_timeout{10'000};
};

struct DaemonConfig {
  std::string listen_host = "127.0.0.1";     // an IP address; IPv6 without brackets
  std::uint16_t listen_port = 8080;           // 0 picks a free port
  std::size_t io_threads = 1;                 // threads serving HTTP
  RuntimeOptions runtime{};                   // workers, capacity, budgets, kind limits
  std::chrono::milliseconds drain_timeout{10'000};
  ServerLimits limits{};
  RecordRetention records{};
  std::string log_level = "info";             // trace, debug, info, warn, error, critical, off
  std::string log_format = "text";            // text or json
  std::map<std::string, CommandConfig, std::less<>> commands;
  std::map<std::string, UpstreamConfig, std::less<>> upstreams;
  // The bearer token that every path but /healthz, /readyz and /metrics requires; empty: none.
  // The key server.auth_token_file sets both: the file is read when the key is read (one line
  // of at most 4096 visible ASCII characters, the trailing newline dropped; the file must not
  // be accessible to group or others). Never logged.
  std::string auth_token;
  std::string auth_token_file;  // where auth_token was read from; empty when set in code
  std::map<std::string, DatabaseConfig, std::less<>> databases;  // for the `sql` kind
  std::map<std::string, QueryConfig, std::less<>> queries;       // for the `sql` kind
  std::optional<ClusterConfig> cluster;  // [cluster]; empty: no cluster

  // Throws ConfigError naming the first inconsistent key.
  void validate() const;
};

// Parses TOML text (layout: daemon/config/sandglassd.toml); `source` names it in errors. Keys
// not given keep their defaults. Checks each key on its own (type, range, format); unknown keys
// are errors. Cross-key checks are `validate()`'s, which the Daemon and the command line run.
// Throws ConfigError naming the dotted key, or `source` for a TOML syntax error.
DaemonConfig parse_config(std::string_view toml_text, std::string_view source = "config");
// Reads and parses a file. Throws ConfigError (key "--config" when the file cannot be read).
DaemonConfig load_config_file(const std::string& path);

// Sets one key of [server], [runtime], [budget], [records] or [log] from text, as a command-line
// flag gives it: `apply_setting(config, "runtime.workers", "4")`. Text that is a decimal
// integer is read as a TOML integer, any other text as a TOML string; the checks are the
// file's. Throws ConfigError naming `key`.
void apply_setting(DaemonConfig& config, std::string_view key, std::string_view text);

}  // namespace sandglass::daemon

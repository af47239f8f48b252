// daemon.hpp — `Daemon`, the HTTP/JSON worker daemon (`sandglassd`) as a library: a Runtime, an
// HTTP server on one port (jobs API, /metrics, /healthz, /readyz), job records and metrics.
//
//   sandglass::daemon::DaemonConfig config = sandglass::daemon::load_config_file(path);
//   sandglass::daemon::Daemon d{config, sandglass::daemon::builtin_kinds(config)};
//   d.start();                                   // binds; d.port() is the real port
//   ...
//   d.request_stop();                            // e.g. on SIGTERM
//   sandglass::daemon::DrainSummary s = d.wait();
//
// Shutdown: `request_stop` turns /readyz to 503 and new submissions to 503 `shutting_down`;
// queued and running jobs go on until the drain timeout, then are cancelled (cause
// `shutdown`); every waiting client gets its terminal answer; then the server closes.
//
// Thread safety: `request_stop`, `end_drain`, `port`, `draining` and `runtime` may be called from any thread;
// `start` and `wait` from one thread, once each.
#pragma once

#include <sandglass/daemon/daemon_config.hpp>
#include <sandglass/daemon/kind_registry.hpp>
#include <sandglass/runtime.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace sandglass::daemon {

// What happened during the daemon's life, for the last log line.
struct DrainSummary {
  RuntimeStats stats;
  bool drained_in_time = true;  // no job needed cancelling when the drain timeout passed
};

class Daemon {
 public:
  // Throws ConfigError for an invalid config.
  Daemon(DaemonConfig config, KindRegistry kinds);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  // Stops (no drain time) if still running. Blocks.
  ~Daemon();

  // Binds the listening socket and starts the I/O threads. Throws std::system_error when the
  // address cannot be bound.
  void start();
  std::uint16_t port() const noexcept;
  std::string listen_address() const;  // "HOST:PORT" as bound

  // Begins the graceful drain. Returns at once; idempotent.
  void request_stop();
  // Ends the drain at once (begun first if it was not): the jobs still queued or running are
  // cancelled now (cause `shutdown`), each with its outcome and its waiting client's answer; the
  // summary's drained_in_time is false. Returns at once; idempotent. (sandglassd: a second
  // SIGTERM or SIGINT.)
  void end_drain();
  bool draining() const noexcept;
  // Blocks until the drain has finished and the server has closed.
  DrainSummary wait();

  Runtime& runtime() noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandglass::daemon

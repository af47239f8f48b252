// http_server.hpp (private) — `HttpServer`, the daemon's HTTP/1.1 server (Boost.Beast, hidden in
// http_server.cpp). It reads requests within the configured limits, hands each to the `Api`, and
// writes the answer; while a request waits for its job, it watches the connection and cancels
// the job (cause caller) when the client goes away.
//
// Limits: a body over max_body_bytes is answered 413, a header section over max_header_bytes
// 431, a malformed request 400, each followed by closing the connection. A request must arrive
// whole within read_timeout from its first byte, an answer must be taken within write_timeout,
// and a keep-alive connection closes after idle_timeout without a request. Connections beyond
// max_connections are closed as soon as they are accepted.
//
// Each request is stamped with the time its first byte was read (`HttpRequest::arrived_at`).
// Once its header section is read, the `Api` may answer it before its body (`Api::intake`: a
// 401, or a 504 for a job whose budget is spent); a job request whose budget runs out while its
// body is still being read is answered 504 at that moment.
//
// Lingering close: a connection that closes after an answer shuts down its sending side, then
// reads and drops what the client still sends, for at most 2 s, before it closes. So an early
// error answer (401, 413, 504) to a client still sending its body is not lost to a TCP reset.
//
// Thread safety: `start`, `stop_accepting`, `stop` from one thread; `connections`, `port`,
// `wait_answered_until` from any.
#pragma once

#include "daemon/api/api.hpp"
#include "daemon/metrics.hpp"

#include <sandglass/daemon/daemon_config.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sandglass::daemon {

class HttpServer {
 public:
  // `api` and `metrics` must outlive the server.
  HttpServer(const ServerLimits& limits, std::size_t io_threads, Api& api, DaemonMetrics& metrics);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // stop()

  // Binds, listens and starts the I/O threads. Throws std::system_error naming the address.
  void start(const std::string& host, std::uint16_t port);
  std::uint16_t port() const noexcept;

  // Closes the listening socket and the connections that are between requests; a request being
  // read or answered is answered (with `Connection: close`), then its connection closes.
  void stop_accepting();
  // Open connections, lingering ones included.
  std::size_t connections() const noexcept;
  // Blocks until no connection owes an answer (each has closed, or lingers after its last
  // answer), or until `deadline`; true in the first case. After stop_accepting, true means
  // every request read has had its answer. Woken by the last connection, not by polling.
  bool wait_answered_until(TimePoint deadline);
  // Closes every connection and joins the I/O threads. Blocks. Idempotent.
  void stop();

  class Impl;  // public only so that connections (in the .cpp) can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sandglass::daemon

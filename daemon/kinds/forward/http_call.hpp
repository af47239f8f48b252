// http_call.hpp (private) — `http_post`, one HTTP/1.1 POST to a dependency that ends by its
// deadline or as soon as the job's token is cancelled: the socket closes, so the dependency
// sees the client go away (a sandglassd upstream then cancels its own job).
//
// Runs a private io_context on the calling (worker) thread: no thread and no OS timer of its own.
//
// Thread safety: a function; the token may be cancelled from any thread.
#pragma once

#include <sandglass/cancel.hpp>
#include <sandglass/deadline.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sandglass::daemon {

struct HttpCall {
  std::string host;
  std::uint16_t port = 0;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent as application/json
  std::size_t max_response_bytes = 1 << 20;
};

struct HttpCallResult {
  enum class Phase : std::uint8_t { connect, request, response, done };
  Phase phase = Phase::connect;  // where it ended (done: a whole answer arrived)
  bool timed_out = false;        // the attempt's deadline passed
  bool cancelled = false;        // the token fired
  std::string error;             // what went wrong, when phase != done
  unsigned status = 0;
  std::string body;
  std::optional<Duration> retry_after;  // the answer's Retry-After, in seconds
};

std::string_view to_string(HttpCallResult::Phase phase) noexcept;

HttpCallResult http_post(const HttpCall& call, Deadline deadline, const CancelToken& token);

}  // namespace sandglass::daemon

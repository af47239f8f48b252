// http_message.hpp (private) — `HttpRequest` and `HttpResponse`, HTTP messages as plain values.
// The API works on these; only the server and its request reading (http_server.cpp,
// http_parse.cpp) know Beast. So the API can be tested, and fuzzed, without a socket.
//
// Thread safety: value types.
#pragma once

#include <sandglass/deadline.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandglass::daemon {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query: "/v1/jobs?wait=false"
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  // When the server read the request's first byte (steady clock): a job's budget counts from
  // here. Empty for a request that did not come from a socket (tests, fuzzing): then from when
  // the API handles it.
  std::optional<TimePoint> arrived_at;

  // The first value of header `name` (lower case), if present.
  std::optional<std::string_view> header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers) {
      if (n == name) return std::string_view{v};
    }
    return std::nullopt;
  }
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/-Length
  std::string body;
};

}  // namespace sandglass::daemon
